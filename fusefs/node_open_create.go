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

// Open opens the node's file. Nothing of the daemon's is held while the
// backing file is opened, and the open cannot wait on another process but
// for a lease's break, as natively (openFile); a file opened for writing
// is then counted among the mount's writers (startWriting).
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	// The kernel supplies O_APPEND offsets itself.
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	r, done, errno := n.ref()
	if errno != 0 {
		return nil, 0, errno
	}
	defer done()
	ffd, errno := n.openFile(r, flags&^syscall.O_TRUNC)
	if errno != 0 {
		return nil, 0, errno
	}
	h := newHandle(n, ffd, flags)
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if errno := n.startWriting(ctx, h, r, flags&syscall.O_TRUNC != 0); errno != 0 {
			return nil, 0, errno
		}
	}
	if !h.pt && n.keepCache(ffd) {
		return h, h.openFlags() | fuse.FOPEN_KEEP_CACHE, 0
	}
	return h, h.openFlags(), 0
}

// openFile opens r, a node's entry checked to be its inode (ref), for
// reading or writing with flags. The kernel sends OPEN only for what it
// knows as a regular file, but its entry may be stale: the name may hold a
// FIFO by now, whose open waits for the other end, or a device, whose open
// is the driver's to make wait. Such an inode is not the node's, and is
// never opened: the open goes through r, never by name again (a symlink
// swapped in is not followed either), so it opens the node's regular file,
// which can make it wait only for the break of a lease another process
// holds on it.
func (n *node) openFile(r nodeRef, flags uint32) (int, syscall.Errno) {
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return -1, toErrno(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		// A new inode may reuse the number where identities have no birth
		// time (macOS, some filesystems): not the node's.
		return -1, syscall.ESTALE
	}
	fd, err := r.reopen(int(flags))
	if err != nil {
		return -1, toErrno(err)
	}
	if errno := n.sameInode(fd); errno != 0 { // macOS reopens by name
		unix.Close(fd)
		return -1, errno
	}
	return fd, 0
}

// startWriting counts h, just opened for writing r's file, among the
// file's writers, and truncates the file for O_TRUNC. A writer holding the
// file open blocks tool mutations until it closes: a tool's publish would
// leave its later writes in the replaced inode, lost. So the name must
// still hold the file once its lock is held, or a publish could have
// swapped the name's inode since the open (ESTALE: the kernel looks the
// name up again). On failure h is closed.
func (n *node) startWriting(ctx context.Context, h *handle, r nodeRef, trunc bool) syscall.Errno {
	unlock, errno := n.countWriter(ctx, h, r)
	if errno != 0 {
		h.LoopbackFile.Release(ctx)
		return errno
	}
	// Truncation by O_TRUNC (with ATOMIC_O_TRUNC it comes here, not as a
	// SETATTR) is a write too, under the file's lock alone.
	var err error
	if trunc {
		err = unix.Ftruncate(h.fd, 0)
	}
	unlock()
	if err != nil {
		h.abandon(writer(ctx))
		return toErrno(err)
	}
	return 0
}

// countWriter counts h among the writers of its file, at the path it is
// at, and returns with the file's lock held. moves is held only for the
// count, which it orders against renames of directories, and over no
// system call that can wait on another process.
func (n *node) countWriter(ctx context.Context, h *handle, r nodeRef) (func(), syscall.Errno) {
	ws := n.fsys.writers
	ws.moves.RLock()
	defer ws.moves.RUnlock()
	key, unlock, ok := ws.lock(n)
	if !ok {
		return nil, syscall.ENOENT
	}
	if errno := n.is(r.dir, r.name); errno != 0 {
		unlock()
		return nil, errno
	}
	h.changed(ctx, key, h.pt) // a passthrough writer's writes are unseen: owed from now
	n.fsys.noteSelfKey(key)
	return unlock, 0
}

var _ = (fs.NodeCreater)((*node)(nil))

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.fsys.writers.moves.RLock() // as an open for writing does: the directory stays put
	defer n.fsys.writers.moves.RUnlock()
	key, ok := n.childKey(name)
	if !ok {
		return nil, nil, 0, syscall.ENOENT
	}
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer done()
	unlock := n.fsys.store.Locks().Lock(key)
	defer unlock()
	ffd, errno := n.createFile(ctx, fd, name, flags, mode)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	n.fsys.logErr("give a new file to its creator", key, giveToCaller(ctx, nodeRef{ffd, fd, name}, mode))
	n.fsys.store.Created(key)
	var st unix.Stat_t
	if err := unix.Fstat(ffd, &st); err != nil {
		unix.Close(ffd)
		return nil, nil, 0, toErrno(err)
	}
	fillAttr(&out.Attr, &st)
	child := n.newChild(ctx, &st, generation(ffd, ""))
	h := newHandle(child.Operations().(*node), ffd, flags)
	h.changed(ctx, key, false)
	n.fsys.writers.owe(h.n) // a new file owes a version
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
		return r.chmod(mode & 0o7777)
	}
	return nil
}
