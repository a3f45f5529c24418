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

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fd, name, done, errno := n.at()
	if errno != 0 {
		return nil, 0, errno
	}
	defer done()
	// The kernel supplies O_APPEND offsets itself; O_NOFOLLOW keeps a
	// symlink swapped into the backing tree from redirecting the open.
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	trunc := flags&syscall.O_TRUNC != 0
	writable := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	var key string
	keyed := false
	if writable {
		// A writer holding the file open blocks tool mutations until it
		// closes: a tool's publish would leave its later writes in the
		// replaced inode, lost. So the open itself runs under the file's
		// lock, or a publish could swap the name's inode between the open
		// and the count.
		n.fsys.writers.moves.RLock()
		defer n.fsys.writers.moves.RUnlock()
		var unlock func()
		key, unlock, keyed = n.fsys.writers.lock(n)
		defer unlock()
	}
	ffd, err := unix.Openat(fd, name, int(flags&^syscall.O_TRUNC)|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, toErrno(err)
	}
	if errno := n.sameInode(ffd); errno != 0 {
		unix.Close(ffd)
		return nil, 0, errno
	}
	h := newHandle(n, ffd, flags)
	if writable {
		if keyed {
			h.changed(ctx, key, h.pt) // a passthrough writer's writes are unseen: owed from now
			n.fsys.noteSelfKey(key)
		}
		// Truncation by O_TRUNC (with ATOMIC_O_TRUNC it comes here, not as
		// a SETATTR) is a write too.
		if trunc {
			if err := unix.Ftruncate(ffd, 0); err != nil {
				if keyed {
					h.abandon(key, writer(ctx))
				} else {
					unix.Close(ffd)
				}
				return nil, 0, toErrno(err)
			}
		}
	}
	if !h.pt && n.keepCache(ffd) {
		return h, h.openFlags() | fuse.FOPEN_KEEP_CACHE, 0
	}
	return h, h.openFlags(), 0
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
	n.setEntryTimeout(out)
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
