package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// Extended attributes have no *at system calls; they are reached through
// the parent directory's descriptor under /proc, which keeps the path short
// whatever the depth. They do not change a file's bytes, so they are not
// versioned.

var _ = (fs.NodeGetxattrer)((*node)(nil))

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if n.isDaemonInfo(attr) {
		return n.daemonInfo(dest)
	}
	var size int
	errno := n.withProcPath(func(p string) (err error) {
		size, err = unix.Lgetxattr(p, attr, dest)
		return err
	})
	return uint32(max(size, 0)), errno
}

var _ = (fs.NodeSetxattrer)((*node)(nil))

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.isDaemonInfo(attr) {
		return syscall.EPERM
	}
	n.noteSelf()
	return n.withProcPath(func(p string) error { return unix.Lsetxattr(p, attr, data, int(flags)) })
}

var _ = (fs.NodeListxattrer)((*node)(nil))

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var size int
	errno := n.withProcPath(func(p string) (err error) {
		size, err = unix.Llistxattr(p, dest)
		return err
	})
	return uint32(max(size, 0)), errno
}

var _ = (fs.NodeRemovexattrer)((*node)(nil))

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.isDaemonInfo(attr) {
		return syscall.EPERM
	}
	n.noteSelf()
	return n.withProcPath(func(p string) error { return unix.Lremovexattr(p, attr) })
}

func (n *node) withProcPath(op func(string) error) syscall.Errno {
	fd, name, done, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer done()
	return toErrno(op(procPath(fd, name)))
}

// isDaemonInfo reports whether attr on n is the root's virtual DaemonInfoXattr.
func (n *node) isDaemonInfo(attr string) bool {
	return attr == DaemonInfoXattr && n == n.fsys.root && n.fsys.info != nil
}

// daemonInfo answers a getxattr of DaemonInfoXattr as the kernel expects:
// the size for an empty buffer, ERANGE for a short one.
func (n *node) daemonInfo(dest []byte) (uint32, syscall.Errno) {
	info := n.fsys.info
	switch {
	case len(dest) == 0:
		return uint32(len(info)), 0
	case len(dest) < len(info):
		return uint32(len(info)), syscall.ERANGE
	}
	return uint32(copy(dest, info)), 0
}
