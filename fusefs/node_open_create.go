package fusefs

// Opening and creating regular files: the handle a writer opens counts in
// the mount's writers from here (writers.go) to its release (file.go).

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

var _ = (fs.NodeOpener)((*node)(nil))

// Open opens the node's file. No open here waits on another process while
// the daemon holds a lock (identity.go), and none can wait on a FIFO or a
// device (openFile): a lease's break, the one wait left, is waited for
// holding nothing, and the open tried again.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fd, name, done, errno := n.at()
	if errno != 0 {
		return nil, 0, errno
	}
	defer done()
	// The kernel supplies O_APPEND offsets itself.
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	for {
		h, errno := n.tryOpen(ctx, fd, name, flags)
		if errno == syscall.EWOULDBLOCK && flags&syscall.O_NONBLOCK == 0 {
			n.awaitLease(fd, name, flags)
			continue
		}
		if errno != 0 {
			return nil, 0, errno
		}
		if h.pt && !h.readOnly {
			// The attributes the kernel cached before are no good from
			// now on (writtenBehind); attributes only, the pages stay.
			n.NotifyContent(-1, 0)
		}
		if !h.pt && n.keepCache(h.fd) {
			return h, h.openFlags() | fuse.FOPEN_KEEP_CACHE, 0
		}
		return h, h.openFlags(), 0
	}
}

// tryOpen is one try of Open, which does not wait: EWOULDBLOCK is a
// lease's break begun. A handle open for writing is counted among the
// file's writers: a writer holding the file open blocks tool mutations
// until it closes (a tool's publish would leave its later writes in the
// replaced inode, lost). So it is opened under the file's lock, where no
// publish can swap the name's inode between the open and the count.
// moves is held for the count only, which it orders against renames of
// directories; the truncation of O_TRUNC (with ATOMIC_O_TRUNC it comes
// here, not as a SETATTR), a write, runs under the file's lock alone.
func (n *node) tryOpen(ctx context.Context, dirfd int, name string, flags uint32) (*handle, syscall.Errno) {
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		fd, errno := n.openFile(dirfd, name, flags)
		if errno != 0 {
			return nil, errno
		}
		return newHandle(n, fd, flags), 0
	}
	h, unlock, errno := n.countWriter(ctx, dirfd, name, flags)
	if errno != 0 {
		return nil, errno
	}
	var err error
	if flags&syscall.O_TRUNC != 0 {
		err = unix.Ftruncate(h.fd, 0)
	}
	unlock()
	if err != nil {
		h.abandon(writer(ctx))
		return nil, toErrno(err)
	}
	return h, 0
}

// countWriter opens the file for writing and counts the handle among the
// file's writers, at the path the file is at now. It returns with the
// file's lock held.
func (n *node) countWriter(ctx context.Context, dirfd int, name string, flags uint32) (*handle, func(), syscall.Errno) {
	ws := n.fsys.writers
	defer ws.holdMoves(false)()
	key, unlock, ok := ws.lock(n)
	if !ok {
		return nil, nil, syscall.ENOENT
	}
	fd, errno := n.openFile(dirfd, name, flags)
	if errno != 0 {
		unlock()
		return nil, nil, errno
	}
	h := newHandle(n, fd, flags)
	h.changed(ctx, key, h.pt) // a passthrough writer's writes are unseen: owed from now
	n.fsys.noteSelfKey(key)
	return h, unlock, 0
}

// openFile opens the node's file, dirfd/name, with flags (O_TRUNC aside),
// without waiting. The kernel sends OPEN only for what it knows as a
// regular file, but its entry may be stale: the name may hold a FIFO by
// now, whose open waits for the other end, or a device, whose open is the
// driver's to make wait, or another file. So the name must hold the node's
// regular file before it is opened; and the open is O_NONBLOCK, so that
// one swapped in meanwhile, by a live process, cannot make it wait either
// (a regular file's open returns EWOULDBLOCK then, for a lease's break),
// and O_NOFOLLOW, so that a symlink does not redirect it; the descriptor
// is checked before anything is read, written or truncated. An open that
// fails on what was swapped in (ENXIO: a FIFO without a reader; ELOOP) is
// ESTALE, for the kernel to look the name up again.
func (n *node) openFile(dirfd int, name string, flags uint32) (int, syscall.Errno) {
	if errno := n.isFile(dirfd, name); errno != 0 {
		return -1, errno
	}
	open := int(flags&^syscall.O_TRUNC) | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, open, 0)
	if err != nil {
		if errno := n.isFile(dirfd, name); errno != 0 {
			return -1, errno
		}
		return -1, toErrno(err)
	}
	errno := n.isFile(fd, "")
	if errno == 0 && flags&syscall.O_NONBLOCK == 0 {
		// F_SETFL takes only the status flags (O_APPEND, O_DIRECT,
		// O_NOATIME, O_NONBLOCK), all known here.
		_, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, open&^unix.O_NONBLOCK)
		errno = toErrno(err)
	}
	if errno != 0 {
		unix.Close(fd)
		return -1, errno
	}
	return fd, 0
}

// awaitLease waits, holding nothing, for the break of a lease another
// process holds on the node's file dirfd/name, begun by an open that could
// not wait: a blocking open of the file returns once the lease is let go
// (or after lease-break-time).
func (n *node) awaitLease(dirfd int, name string, flags uint32) {
	if n.isFile(dirfd, name) != 0 {
		return // the retry answers
	}
	open := int(flags&^(syscall.O_TRUNC|syscall.O_NONBLOCK)) | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if fd, err := unix.Openat(dirfd, name, open, 0); err == nil {
		unix.Close(fd)
	}
}

var _ = (fs.NodeCreater)((*node)(nil))

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	defer n.fsys.writers.holdMoves(false)() // as an open for writing does: the directory stays put
	key, ok := n.childKey(name)
	if !ok {
		return nil, nil, 0, syscall.ENOENT
	}
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer done()
	mode = n.fsys.createMode(ctx, fd, mode)
	unlock := n.fsys.mount.Locks().Lock(key)
	defer unlock()
	ffd, errno := n.createFile(ctx, fd, name, flags, mode)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	n.fsys.logErr("give a new file to its creator", key, giveToCaller(ctx, nodeRef{ffd, fd, name}, mode))
	n.fsys.mount.Created(key)
	var st unix.Stat_t
	if err := unix.Fstat(ffd, &st); err != nil {
		unix.Close(ffd)
		return nil, nil, 0, toErrno(err)
	}
	fillAttr(&out.Attr, &st)
	n.setEntryTimeout(out)
	child := n.newChild(ctx, &st, generation(ffd, ""))
	h := newHandle(child.Operations().(*node), ffd, flags)
	h.changed(ctx, key, false)
	n.fsys.writers.owe(h.n) // a new file owes a version
	if h.pt && !h.readOnly {
		out.SetAttrTimeout(uncached) // see writtenBehind
	}
	return child, h, h.openFlags(), 0
}

// createFile creates dirfd/name, which must not exist, and opens it with
// the CREATE request's flags, for the caller.
//
// The kernel sends CREATE only for a name it believes absent: a negative
// entry it trusts, or a lookup that found nothing. A file there now means
// its view is stale (the file was made straight in the backing directory
// while the watcher ignored the name, within 100 ms of a change through
// the mount, or its events overflowed). Opening that file would bypass
// every permission check, as root, and handing it to the caller would give
// them someone else's file. So the create is exclusive, and an existing
// file is answered EEXIST if the caller asked for O_EXCL, else ESTALE: the
// VFS then retries the whole open once with LOOKUP_REVAL, FUSE drops the
// negative entry and looks the name up, and the open of the file it finds
// is checked against that file's own mode and owner (default_permissions).
func (n *node) createFile(ctx context.Context, dirfd int, name string, flags, mode uint32) (int, syscall.Errno) {
	n.noteSelfChild(name)
	// The kernel supplies O_APPEND offsets itself; a new file has nothing
	// to truncate.
	open := flags&^(syscall.O_APPEND|syscall.O_TRUNC|fuse.FMODE_EXEC) | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, int(open), bornMode(mode))
	switch {
	case errors.Is(err, unix.EEXIST) && flags&syscall.O_EXCL == 0:
		return -1, syscall.ESTALE
	case err != nil:
		return -1, toErrno(err)
	}
	return fd, 0
}

// bornMode is the mode a daemon running as root creates an entry with:
// without set-id bits, which would make it, for a moment, root's set-id
// file; giveToCaller puts them back once the entry is the caller's.
func bornMode(mode uint32) uint32 {
	if os.Geteuid() != 0 {
		return mode
	}
	return mode &^ (syscall.S_ISUID | syscall.S_ISGID)
}

// giveToCaller makes the new entry r the calling user's, as a normal
// filesystem would, when the daemon runs as root: by descriptor, so it is
// the entry just made whatever its name holds by now, and with the set-id
// bits of mode it was made without (bornMode). In a set-group-ID
// directory its group stays the directory's, which it got when made.
func giveToCaller(ctx context.Context, r nodeRef, mode uint32) error {
	c, ok := fuse.FromContext(ctx)
	if os.Geteuid() != 0 || !ok {
		return nil
	}
	gid := int(c.Gid)
	var dir unix.Stat_t
	if err := unix.Fstat(r.dir, &dir); err != nil {
		return err
	}
	if dir.Mode&syscall.S_ISGID != 0 {
		gid = -1
	}
	if err := r.chown(int(c.Uid), gid); err != nil {
		return err
	}
	if mode&syscall.S_IFMT != syscall.S_IFDIR && mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
		return addSetID(r, mode)
	}
	return nil
}

// addSetID gives the new entry r the set-id bits of mode, keeping the
// permissions it was born with: a parent's default ACL may have decided
// them, and chmod would change its mask.
func addSetID(r nodeRef, mode uint32) error {
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return err
	}
	return r.chmod(uint32(st.Mode)&0o1777 | mode&(syscall.S_ISUID|syscall.S_ISGID))
}
