package fusefs

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// Acting on the inode the kernel means.
//
// The daemon runs as root on behalf of its callers, and the kernel, not the
// daemon, checks their permissions (default_permissions) — against the
// entries and attributes it has cached, for up to the cache timeout. The
// backing name may hold something else by then: a file put there straight
// in the backing directory while the watcher ignored the name (within
// 100 ms of a change through the mount to it, or after its events
// overflowed), or published by a tool. Acting on what the name holds now
// would do, as root, what the caller was never allowed: the sticky bit and
// ownership the kernel checked were another file's. So an operation by
// name first checks that the name holds the node's inode (its number and
// birth time, as Lookup gave them to the kernel), and answers ESTALE when
// it does not; the VFS then repeats the system call once with LOOKUP_REVAL,
// which makes FUSE look every name up again, and the second try is checked
// against fresh attributes. (Traced on Linux 6.18 for open and stat below
// a swapped directory, unlink, rmdir, rename, link, chmod, utimensat,
// truncate and setxattr: the request, ESTALE, LOOKUPs, then the kernel's
// own refusal.) An operation through an open file (fchmod and the like,
// which also arrive by node) is not retried: it gets the ESTALE.

// nodeRef is a descriptor of the entry a node's name holds, checked to be
// the node's inode, for an operation by name to act on.
type nodeRef struct {
	fd   int    // the entry itself (O_PATH on Linux)
	dir  int    // its directory
	name string // its name there
}

// ref opens n's entry for an operation by name. The returned close
// function must be called.
func (n *node) ref() (nodeRef, func(), syscall.Errno) {
	dir, name, done, errno := n.at()
	if errno != 0 {
		return nodeRef{}, nil, errno
	}
	fd, err := openNode(dir, name)
	if err != nil {
		done()
		return nodeRef{}, nil, toErrno(err)
	}
	if errno := n.sameInode(fd); errno != 0 {
		unix.Close(fd)
		done()
		return nodeRef{}, nil, errno
	}
	return nodeRef{fd, dir, name}, func() { unix.Close(fd); done() }, 0
}

// sameInode checks that fd, opened by n's name, is the file the kernel
// means by n. A tool publish renames a new inode over the name; until the
// kernel drops its entry, it still sends requests for the old one. Opening
// the new file for them would mix the two — an O_APPEND write would land at
// the old file's size, leaving a hole. ESTALE makes the kernel look the name
// up again and retry.
func (n *node) sameInode(fd int) syscall.Errno {
	return n.is(fd, "")
}

// is checks that dirfd/name (dirfd itself when name is "") is n's inode.
func (n *node) is(dirfd int, name string) syscall.Errno {
	if n.EmbeddedInode() == n.fsys.root.EmbeddedInode() {
		return 0
	}
	ino, gen, err := identity(dirfd, name)
	if err != nil {
		return toErrno(err)
	}
	if a := n.StableAttr(); ino != a.Ino || gen != a.Gen {
		return syscall.ESTALE
	}
	return 0
}

// childIs checks that dirfd/name, in n's directory, holds the child the
// kernel means by name: ESTALE when it holds another inode, or anything
// while go-fuse's tree — what the kernel was told — has no child there.
func (n *node) childIs(dirfd int, name string) syscall.Errno {
	c := childNode(n, name)
	if c == nil {
		if _, _, err := identity(dirfd, name); err != nil {
			return toErrno(err)
		}
		return syscall.ESTALE
	}
	return c.is(dirfd, name)
}

// targetIs is childIs for a rename's target, which may also be absent.
func (n *node) targetIs(dirfd int, name string) syscall.Errno {
	if _, _, err := identity(dirfd, name); errors.Is(err, unix.ENOENT) {
		return 0
	}
	return n.childIs(dirfd, name)
}
