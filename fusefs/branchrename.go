package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

var _ = (fs.NodeRenamer)((*bnode)(nil))

// Rename moves a file within the view: it is copied up and its old name
// whited out. A directory of the branch's own renames in the upper
// directory (renameDir); one that shows anything of the snapshot answers
// EXDEV, as for a move across filesystems (mv copies it), and so does an
// exchange.
func (n *bnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	from, to := n.childKey(name), newParent.(*bnode).childKey(newName)
	src, err := n.v.resolve(from)
	if err != nil {
		return toErrno(err)
	}
	fi, err := src.info()
	if err != nil || flags&^uint32(renameNoreplace) != 0 {
		return syscall.EXDEV
	}
	if src.dir || fi.IsDir() {
		return n.v.renameDir(from, to, flags)
	}
	if flags&renameNoreplace != 0 {
		if _, err := n.v.resolve(to); err == nil {
			return syscall.EEXIST
		}
	}
	if err := n.v.copyUp(from, false); err != nil {
		return toErrno(err)
	}
	if errno := n.v.renameUpper(from, to); errno != 0 {
		return errno
	}
	n.v.moveIno(from, to)
	n.v.moveHandles(from, to)
	n.v.unwhite(to)
	return n.v.whiteLower(from)
}

// whiteLower whites out key, just renamed or removed from the upper
// directory, if the snapshot has it.
func (v *BranchView) whiteLower(key string) syscall.Errno {
	if _, err := v.resolveLower(key); err == nil && !v.index.opaqueAbove(key) {
		return toErrno(v.index.set(key, entryWhiteout))
	}
	return 0
}

// renameDir renames the directory from to to. Only a directory of the
// branch's own, where nothing of the snapshot shows (new in the branch, or
// opaque), moves, as one rename in the upper directory: the snapshot's
// would have to be copied up whole first.
func (v *BranchView) renameDir(from, to string, flags uint32) syscall.Errno {
	if v.snapshotShows(from) {
		return syscall.EXDEV
	}
	if errno := v.renameDirTarget(to, flags); errno != 0 {
		return errno
	}
	opaque := v.index.get(from) == entryOpaque
	if errno := v.renameUpper(from, to); errno != 0 {
		return errno
	}
	v.moveInos(from, to)
	v.moveHandles(from, to)
	// Whiteouts below an opaque directory are moot; so are those below
	// the directory replaced, which was empty.
	if err := v.index.dropBelow(from); err != nil {
		return toErrno(err)
	}
	if opaque {
		if err := v.index.set(from, ""); err != nil {
			return toErrno(err)
		}
	}
	if errno := v.whiteLower(from); errno != 0 {
		return errno
	}
	v.unwhite(to)
	if !v.snapshotShows(to) {
		return 0
	}
	if err := v.index.dropBelow(to); err != nil {
		return toErrno(err)
	}
	return toErrno(v.index.set(to, entryOpaque))
}

// renameDirTarget checks that a directory may be renamed to to: nothing
// is there, or an empty directory (and flags do not forbid replacing it).
func (v *BranchView) renameDirTarget(to string, flags uint32) syscall.Errno {
	dst, err := v.resolve(to)
	if err != nil {
		return 0
	}
	if flags&renameNoreplace != 0 {
		return syscall.EEXIST
	}
	if fi, err := dst.info(); err != nil || !dst.dir && !fi.IsDir() {
		return syscall.ENOTDIR
	}
	if ents, errno := v.list(to); errno != 0 || len(ents) > 0 {
		return syscall.ENOTEMPTY
	}
	return 0
}

// snapshotShows reports whether key, a directory, shows anything of the
// snapshot: the snapshot has it, and no opaque directory hides it.
func (v *BranchView) snapshotShows(key string) bool {
	_, err := v.resolveLower(key)
	return err == nil && !v.index.opaqueAbove(key)
}

// renameUpper renames the upper file from to to, forgetting the number
// of a file it replaces.
func (v *BranchView) renameUpper(from, to string) syscall.Errno {
	src, dst, errno := v.upperPair(from, to)
	if errno != 0 {
		return errno
	}
	defer src.close()
	defer dst.close()
	var st unix.Stat_t
	replaced, last := lastName(dst)
	if unix.Fstatat(src.dir, src.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || replaced == st.Ino {
		last = false // nothing replaced, or a name of the same file
	}
	if err := unix.Renameat(src.dir, src.name, dst.dir, dst.name); err != nil {
		return toErrno(err)
	}
	if last {
		v.forgetUpperIno(replaced)
	}
	return 0
}
