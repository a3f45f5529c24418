package fusefs

// Directory entries other than regular files opened or created: mkdir,
// mknod, symlink, link, unlink, rmdir.

import (
	"context"
	"errors"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// entryFd stats the entry open at fd (any kind of descriptor) and makes
// its inode.
func (n *node) entryFd(ctx context.Context, fd int, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, toErrno(err)
	}
	fillAttr(&out.Attr, &st)
	n.setEntryTimeout(out)
	return n.newChild(ctx, &st, generation(fd, "")), 0
}

var _ = (fs.NodeMkdirer)((*node)(nil))

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	mode = n.fsys.createMode(ctx, fd, mode)
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
	mode = n.fsys.createMode(ctx, fd, mode)
	unlock := n.fsys.mount.Locks().Lock(key)
	defer unlock()
	n.noteSelfChild(name)
	absent := absentAt(fd, name) // else mknod fails: nothing to keep
	since := coarseNow()
	if err := mknodat(fd, name, bornMode(mode), int(rdev)); err != nil {
		return nil, toErrno(err)
	}
	if mode&syscall.S_IFMT == syscall.S_IFREG {
		if absent {
			n.fsys.mount.Created(key)
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
	unlock := n.fsys.mount.Locks().Lock(key)
	defer unlock()
	n.noteSelfChild(name)
	src.noteSelf()               // its link count changes
	absent := absentAt(fd, name) // else link fails: nothing to keep
	if err := r.link(fd, name); err != nil {
		return nil, toErrno(err)
	}
	if absent {
		n.fsys.mount.Created(key)
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
	unlock := n.fsys.mount.Locks().Lock(key)
	defer unlock()
	// The kernel checked the sticky bit against its child's owner.
	if errno := n.childIs(fd, name); errno != 0 {
		return errno
	}
	n.noteSelfChild(name)
	n.fsys.mount.Preserve(key) // what rm removes stays restorable
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
	var st unix.Stat_t
	statErr := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != nil {
		return toErrno(err)
	}
	if c := childNode(n, name); c != nil && statErr == nil {
		c.removed(&st)
	}
	return 0
}

// absentAt reports whether dirfd holds nothing called name.
func absentAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return errors.Is(unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW), unix.ENOENT)
}
