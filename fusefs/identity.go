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
//
// Every request that reaches the backing tree, what it risked as root, and
// why it is safe (audited for the allow_other mount of a root daemon):
//
//   - LOOKUP, READDIR(PLUS) and every request on a directory's entries:
//     working in a directory swapped in under the node's name (listing,
//     creating in root's private directory). dirFd checks the directory is
//     the node's.
//   - CREATE: opening an existing file as root (bypassing its mode) and
//     chowning it to the caller. The kernel sends CREATE only for a name it
//     believes absent, so an existing file means a stale negative entry:
//     the create is O_EXCL, an existing file is ESTALE (EEXIST under
//     O_EXCL), and the new file is chowned through its descriptor
//     (createFile).
//   - MKDIR, MKNOD, SYMLINK: the kernel looks the name up afresh first
//     (LOOKUP_EXCL), and the backing call fails on an existing name; the
//     risk was the chown by name that followed, of whatever the name held
//     by then. The new entry is opened, checked to be the one just made,
//     and chowned through that descriptor (ownNew).
//   - LINK: linking another inode than the one the kernel checked
//     (protected_hardlinks). The source is opened, checked, and that
//     descriptor is linked.
//   - UNLINK, RMDIR: the sticky bit was checked against a stale entry's
//     owner. The name must hold the kernel's child node (childIs).
//   - RENAME: as unlink, for the entry moving and the one it replaces; a
//     target the kernel had no node for is ESTALE (renameOp.stale). (Linux
//     looks rename targets up afresh itself; the check covers the rest.)
//   - SETATTR without a file (chmod, chown, utimensat, truncate): changing
//     whatever the name holds, whose owner the kernel never checked. The
//     entry is opened, checked, and changed through the descriptor
//     (setattr.go). With a file (ftruncate): through the file.
//   - SETXATTR, REMOVEXATTR, and GETXATTR of user.*: as SETATTR, including
//     ACLs (xattr.go). LISTXATTR: trusted.* names only to a caller with
//     CAP_SYS_ADMIN, as natively.
//   - OPEN: reading or writing another inode, and waiting, as root, on
//     whatever the name holds now — a FIFO's other end, a device's driver.
//     The name must hold the node's regular file before it is opened, and
//     the descriptor is checked after (openFile): a FIFO or device is
//     never opened, but in a race with a live process, and then with
//     O_NONBLOCK, so it cannot wait. The one wait left, a lease's break,
//     is waited for holding none of the daemon's locks (Open).
//   - GETLK, SETLK, SETLKW: never sent; the kernel keeps the mount's file
//     locks itself (fs.go).
//   - IOCTL: any command run as root on the backing file. Only the
//     fileattr ioctls, which the kernel checks against the caller, pass.
//   - GETATTR, READLINK, other GETXATTRs, STATFS: by name, reading what
//     anyone who reaches the name natively may read.
//   - READ, WRITE, FALLOCATE, COPY_FILE_RANGE, FSYNC, FLUSH: through the
//     open file's own descriptor, a regular file's.
//
// What remains: between the check and a system call by name (rename, unlink,
// rmdir) a process writing straight into the backing directory can still
// swap the name; that is a race with a live process, not a stale cache a
// caller can count on. A new entry made by root in the same tick of the
// clock as the daemon's (a few ms) and moved into its name in the
// microseconds before ownNew looks cannot be told from it by its birth time.
// A FIFO or device moved into a file's name between the check and the open
// is opened, O_NONBLOCK, and closed at once: a FIFO's other end sees a
// reader or writer come and go, a device's driver is asked to open it
// (making one takes CAP_MKNOD). And mode or owner changes made straight in
// the backing directory within the watcher's window show late in the
// kernel, like any outside change it ignored: the inode is the same, only
// its cached attributes are old, and the kernel checks the caller against
// those.
//
// Waiting on another process. A request that waits while it holds a lock
// others wait for stalls them too, and the mount's moves lock (writers.go)
// spreads a stall to the whole mount: a directory rename waiting for it
// holds up every open for writing, create, flush and release after it,
// and, behind the kernel's rename, the lookups, listings and the tools'
// invalidations in its directories. So the system calls that can wait on
// another process are made holding none of the daemon's locks: the opens
// of a file that wait for a lease's break (OPEN's, and the truncate of a
// SETATTR). Those made under a lock cannot: an
// open for writing with O_NONBLOCK (openFile), opens of a new file
// (O_CREAT|O_EXCL, which opens nothing that exists), O_PATH opens,
// statx, the lease probe of mapped.go (F_SETLEASE answers at once), the
// store's reads of regular files (opened O_NONBLOCK, checked regular),
// and changes to a regular file, which the kernel sends holding
// its own lock of the mount's inode: a writer through the mount stalled
// with the backing inode's lock (on memory it serves itself) stalls the
// other users of that file in the kernel, not the daemon. Only a process
// working straight in the backing directory could hold a backing inode's
// or directory's lock for long behind the kernel's back, and stall what
// the daemon does to that entry, and through the moves lock more.

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

// isFile is is for a regular file, the one thing the kernel opens through
// the daemon: where identities have no birth time (macOS, some
// filesystems) a FIFO made in its place may reuse its number.
func (n *node) isFile(dirfd int, name string) syscall.Errno {
	ino, gen, typ, err := typedIdentity(dirfd, name)
	if err != nil {
		return toErrno(err)
	}
	if a := n.StableAttr(); ino != a.Ino || gen != a.Gen || typ != unix.S_IFREG {
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
