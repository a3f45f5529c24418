package fusefs

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

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

// entryFd stats the entry open at fd (any kind of descriptor) and makes
// its inode.
func (n *node) entryFd(ctx context.Context, fd int, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, toErrno(err)
	}
	fillAttr(&out.Attr, &st)
	return n.newChild(ctx, &st, generation(fd, "")), 0
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

var _ = (fs.NodeMkdirer)((*node)(nil))

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	n.noteSelfChild(name)
	since := coarseNow()
	if err := unix.Mkdirat(fd, name, mode); err != nil {
		return nil, toErrno(err)
	}
	return n.made(ctx, fd, name, syscall.S_IFDIR, since, mode, out)
}

var _ = (fs.NodeMknoder)((*node)(nil))

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	key, ok := n.childKey(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	unlock := n.fsys.store.Locks().Lock(key)
	defer unlock()
	n.noteSelfChild(name)
	absent := absentAt(fd, name) // else mknod fails: nothing to keep
	since := coarseNow()
	if err := mknodat(fd, name, bornMode(mode), int(rdev)); err != nil {
		return nil, toErrno(err)
	}
	if mode&syscall.S_IFMT == syscall.S_IFREG {
		if absent {
			n.fsys.store.Created(key)
		}
		n.fsys.refresh(nil, key, writer(ctx))
	}
	return n.made(ctx, fd, name, mode&syscall.S_IFMT, since, mode, out)
}

var _ = (fs.NodeSymlinker)((*node)(nil))

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	n.noteSelfChild(name)
	since := coarseNow()
	if err := unix.Symlinkat(target, fd, name); err != nil {
		return nil, toErrno(err)
	}
	return n.made(ctx, fd, name, syscall.S_IFLNK, since, 0, out)
}

// made gives dirfd/name, an entry of type typ the daemon has just made (at
// since or later), to the caller, and makes its inode. See ownNew.
func (n *node) made(ctx context.Context, dirfd int, name string, typ uint32, since unix.Timespec, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fsys.afterMake != nil {
		n.fsys.afterMake(dirfd, name)
	}
	fd, err := openNode(dirfd, name)
	if err != nil {
		return nil, toErrno(err)
	}
	defer unix.Close(fd)
	if errno := n.ownNew(ctx, nodeRef{fd, dirfd, name}, typ, since, mode); errno != 0 {
		return nil, errno
	}
	return n.entryFd(ctx, fd, out)
}

// ownNew gives the new entry r to the caller (giveToCaller), only if r is
// the entry the daemon made: a process writing straight into the backing
// directory could have put another one at its name meanwhile, even root's.
// That one is left alone and the answer is ESTALE; the kernel's retry then
// finds the name taken (EEXIST).
func (n *node) ownNew(ctx context.Context, r nodeRef, typ uint32, since unix.Timespec, mode uint32) syscall.Errno {
	if os.Geteuid() != 0 {
		return 0
	}
	if !bornSince(r.fd, typ, since) {
		return syscall.ESTALE
	}
	key, _ := n.childKey(r.name)
	n.fsys.logErr("give a new entry to its creator", key, giveToCaller(ctx, r, typ|mode&0o7777))
	return 0
}

var _ = (fs.NodeLinker)((*node)(nil))

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	src, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	key, ok := n.childKey(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	// The inode linked is the one the kernel checked the caller against
	// (protected_hardlinks), whatever the source's name holds now.
	r, sdone, errno := src.ref()
	if errno != 0 {
		return nil, errno
	}
	defer sdone()
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	unlock := n.fsys.store.Locks().Lock(key)
	defer unlock()
	n.noteSelfChild(name)
	src.noteSelf()               // its link count changes
	absent := absentAt(fd, name) // else link fails: nothing to keep
	if err := r.link(fd, name); err != nil {
		return nil, toErrno(err)
	}
	if absent {
		n.fsys.store.Created(key)
	}
	n.fsys.refresh(nil, key, writer(ctx))
	return n.entryFd(ctx, r.fd, out)
}

var _ = (fs.NodeUnlinker)((*node)(nil))

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	key, ok := n.childKey(name)
	if !ok {
		return syscall.ENOENT
	}
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return errno
	}
	defer done()
	unlock := n.fsys.store.Locks().Lock(key)
	defer unlock()
	// The kernel checked the sticky bit against its child's owner.
	if errno := n.childIs(fd, name); errno != 0 {
		return errno
	}
	n.noteSelfChild(name)
	n.fsys.store.Preserve(key) // what rm removes stays restorable
	if err := unix.Unlinkat(fd, name, 0); err != nil {
		return toErrno(err)
	}
	n.fsys.writers.unlinked(key)          // a writer of it writes nobody's version now
	n.fsys.refresh(nil, key, writer(ctx)) // records the deletion
	return 0
}

var _ = (fs.NodeRmdirer)((*node)(nil))

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return errno
	}
	defer done()
	if errno := n.childIs(fd, name); errno != 0 {
		return errno
	}
	n.noteSelfChild(name)
	return toErrno(unix.Unlinkat(fd, name, unix.AT_REMOVEDIR))
}

// absentAt reports whether dirfd holds nothing called name.
func absentAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return errors.Is(unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW), unix.ENOENT)
}
