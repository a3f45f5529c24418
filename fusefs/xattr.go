package fusefs

import (
	"context"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// Extended attributes have no *at system calls. Those set or removed are
// set on the node's inode through a descriptor checked to be it (see
// identity.go): the kernel checked the caller's write permission (user.*)
// or ownership (ACLs) against that inode's attributes. So are user.* reads,
// which need read permission; every other name can be read, and every
// name listed, by anyone who can reach the file natively, so those go by
// name, through the parent directory's descriptor under /proc, which keeps
// the path short whatever the depth. They do not change a file's bytes, so
// they are not versioned.

var _ = (fs.NodeGetxattrer)((*node)(nil))

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	var size int
	var errno syscall.Errno
	if strings.HasPrefix(attr, "user.") {
		errno = n.withRef(func(r nodeRef) (err error) {
			size, err = r.getxattr(attr, dest)
			return err
		})
	} else {
		errno = n.withProcPath(func(p string) (err error) {
			size, err = unix.Lgetxattr(p, attr, dest)
			return err
		})
	}
	return uint32(max(size, 0)), errno
}

var _ = (fs.NodeSetxattrer)((*node)(nil))

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	n.noteSelf()
	return n.withRef(func(r nodeRef) error { return r.setxattr(attr, data, int(flags)) })
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
	n.noteSelf()
	return n.withRef(func(r nodeRef) error { return r.removexattr(attr) })
}

func (n *node) withProcPath(op func(string) error) syscall.Errno {
	fd, name, done, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer done()
	return toErrno(op(procPath(fd, name)))
}

func (n *node) withRef(op func(nodeRef) error) syscall.Errno {
	r, done, errno := n.ref()
	if errno != 0 {
		return errno
	}
	defer done()
	return toErrno(op(r))
}
