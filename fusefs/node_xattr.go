package fusefs

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
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
	if n.isDaemonInfo(attr) {
		return n.daemonInfo(dest)
	}
	var size int
	var errno syscall.Errno
	if strings.HasPrefix(attr, "user.") {
		errno = n.withRef(func(r nodeRef) (err error) {
			size, err = r.getxattr(attr, dest)
			return err
		})
	} else {
		errno = n.withAt(func(dirfd int, name string) (err error) {
			size, err = lgetxattrAt(dirfd, name, attr, dest)
			return err
		})
	}
	return uint32(max(size, 0)), errno
}

var _ = (fs.NodeSetxattrer)((*node)(nil))

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.isDaemonInfo(attr) {
		return syscall.EPERM
	}
	n.noteSelf()
	return n.withRef(func(r nodeRef) error {
		if err := r.setxattr(attr, data, int(flags)); err != nil {
			return err
		}
		return n.fsys.clearSGID(ctx, r, attr)
	})
}

var _ = (fs.NodeListxattrer)((*node)(nil))

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	var list []byte
	errno := n.withProcPath(func(p string) (err error) {
		list, err = listxattrs(p, len(dest))
		return err
	})
	if errno != 0 {
		return 0, errno
	}
	list = listedTo(ctx, list)
	switch {
	case len(dest) == 0: // the size it takes
		return uint32(len(list)), 0
	case len(dest) < len(list):
		return 0, syscall.ERANGE
	}
	return uint32(copy(dest, list)), 0
}

// listxattrs reads p's whole list of names, into a buffer of size first.
func listxattrs(p string, size int) ([]byte, error) {
	buf := make([]byte, max(size, 256))
	for {
		k, err := unix.Llistxattr(p, buf)
		if err == nil {
			return buf[:k], nil
		}
		if !errors.Is(err, unix.ERANGE) {
			return nil, err
		}
		if size, err = unix.Llistxattr(p, nil); err != nil { // it grew
			return nil, err
		}
		buf = make([]byte, size)
	}
}

// listedTo is the part of list (NUL-terminated names) the caller may see.
// The kernel lists trusted.* names only to a caller with CAP_SYS_ADMIN, and
// refuses the others reading them before FUSE is asked, but it passes a
// FUSE listing on whole: the daemon, root, sees them all. Whether the
// caller has the capability is read from /proc (see capSysAdmin), only
// when the list has such a name. security.* names are listed to anyone,
// natively too.
func listedTo(ctx context.Context, list []byte) []byte {
	trusted := []byte("trusted.")
	if !bytes.HasPrefix(list, trusted) && !bytes.Contains(list, []byte("\x00trusted.")) {
		return list
	}
	if c, ok := fuse.FromContext(ctx); ok && capSysAdmin(c.Pid) {
		return list
	}
	var out []byte
	for name := range bytes.SplitAfterSeq(list, []byte{0}) {
		if !bytes.HasPrefix(name, trusted) {
			out = append(out, name...)
		}
	}
	return out
}

var _ = (fs.NodeRemovexattrer)((*node)(nil))

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.isDaemonInfo(attr) {
		return syscall.EPERM
	}
	n.noteSelf()
	return n.withRef(func(r nodeRef) error { return r.removexattr(attr) })
}

func (n *node) withAt(op func(dirfd int, name string) error) syscall.Errno {
	fd, name, done, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer done()
	return toErrno(op(fd, name))
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
