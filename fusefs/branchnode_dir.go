package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// list is the union listing of directory key: the upper directory's
// entries and, unless it is opaque, the snapshot's, less whiteouts.
func (v *BranchView) list(key string) ([]fuse.DirEntry, syscall.Errno) {
	src, err := v.resolve(key)
	if err != nil {
		return nil, toErrno(err)
	}
	seen := map[string]uint32{}
	if src.upper {
		readNames(source{root: v.upper, rel: key}, seen)
	}
	if !v.index.opaqueAbove(key) {
		v.lowerNames(key, seen)
	}
	for name := range v.index.whitedIn(key) {
		delete(seen, name)
	}
	out := make([]fuse.DirEntry, 0, len(seen))
	for name, mode := range seen {
		out = append(out, fuse.DirEntry{Name: name, Mode: mode})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, 0
}

// lowerNames adds the snapshot's entries of directory key to seen: the
// workspace's now, corrected by what changed since the branch point.
func (v *BranchView) lowerNames(key string, seen map[string]uint32) {
	lower := map[string]uint32{}
	if src, err := v.resolveLower(key); err == nil && !src.dir {
		readNames(src, lower)
	}
	drift, _ := v.snap.Drifted(key)
	for name, isDir := range drift {
		st, err := v.snap.State(filepath.Join(key, name))
		switch {
		case isDir:
			lower[name] = syscall.S_IFDIR
		case err == nil && st.Changed && st.Version.IsZero():
			delete(lower, name)
		case err == nil && st.Changed:
			lower[name] = syscall.S_IFREG
		}
	}
	for name, mode := range lower {
		if _, ok := seen[name]; !ok {
			seen[name] = mode
		}
	}
}

func readNames(src source, into map[string]uint32) {
	d, err := openBeneath(src.root, src.rel, syscall.O_RDONLY|syscall.O_DIRECTORY)
	if err != nil {
		return
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return
	}
	for _, e := range ents {
		into[e.Name()] = modeOf(e)
	}
}

func modeOf(e os.DirEntry) uint32 {
	switch t := e.Type(); {
	case t.IsDir():
		return syscall.S_IFDIR
	case t&os.ModeSymlink != 0:
		return syscall.S_IFLNK
	case t.IsRegular():
		return syscall.S_IFREG
	}
	return 0
}

var _ = (fs.NodeCreater)((*bnode)(nil))

func (n *bnode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	key := n.childKey(name)
	a, errno := n.v.upperAt(key)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer a.close()
	if flags&syscall.O_EXCL != 0 {
		if _, err := n.v.resolve(key); err == nil {
			return nil, nil, 0, syscall.EEXIST
		}
	} else if err := n.v.copyUp(key, true); err != nil && toErrno(err) != syscall.ENOENT {
		return nil, nil, 0, toErrno(err)
	}
	fd, err := unix.Openat(a.dir, a.name, int(flags)|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	n.v.unwhite(key)
	child, errno := n.child(ctx, key, out)
	if errno != 0 {
		unix.Close(fd)
		return nil, nil, 0, errno
	}
	return child, n.v.handle(fd, key, out.Attr.Ino, true), viewOpenFlags, 0
}

// upperAt is key's name in its directory of the upper layer, the
// directories above it made there.
func (v *BranchView) upperAt(key string) (at, syscall.Errno) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.upperParents(key); err != nil {
		return at{}, toErrno(err)
	}
	a, err := atBeneath(v.upper, key)
	if err != nil {
		return at{}, toErrno(err)
	}
	return a, 0
}

// unwhite forgets a whiteout at key, which exists again.
func (v *BranchView) unwhite(key string) {
	if v.index.get(key) == entryWhiteout {
		v.index.set(key, "")
	}
}

var _ = (fs.NodeMkdirer)((*bnode)(nil))

func (n *bnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	key := n.childKey(name)
	if errno := n.v.makeUpper(key, func(dir int, name string) error { return unix.Mkdirat(dir, name, mode) }); errno != 0 {
		return nil, errno
	}
	if n.v.index.get(key) == entryWhiteout {
		n.v.index.set(key, entryOpaque) // a new directory: nothing of the old one shows
	}
	return n.child(ctx, key, out)
}

var _ = (fs.NodeSymlinker)((*bnode)(nil))

func (n *bnode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	key := n.childKey(name)
	if errno := n.v.makeUpper(key, func(dir int, name string) error { return unix.Symlinkat(target, dir, name) }); errno != 0 {
		return nil, errno
	}
	n.v.unwhite(key)
	return n.child(ctx, key, out)
}

var _ = (fs.NodeMknoder)((*bnode)(nil))

// Mknod makes a FIFO, a socket or (for a daemon allowed to) a device node
// in the branch's own layer. A merge leaves it out: it is not a regular file.
func (n *bnode) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	key := n.childKey(name)
	if errno := n.v.makeUpper(key, func(dir int, name string) error { return mknodat(dir, name, mode, int(dev)) }); errno != 0 {
		return nil, errno
	}
	n.v.unwhite(key)
	return n.child(ctx, key, out)
}

var _ = (fs.NodeUnlinker)((*bnode)(nil))

func (n *bnode) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.v.remove(n.childKey(name), false)
}

var _ = (fs.NodeRmdirer)((*bnode)(nil))

func (n *bnode) Rmdir(ctx context.Context, name string) syscall.Errno {
	key := n.childKey(name)
	ents, errno := n.v.list(key)
	if errno != 0 {
		return errno
	}
	if len(ents) > 0 {
		return syscall.ENOTEMPTY
	}
	return n.v.remove(key, true)
}

// remove deletes key from the view: its upper file, and a whiteout if the
// snapshot has it.
func (v *BranchView) remove(key string, dir bool) syscall.Errno {
	src, err := v.resolve(key)
	if err != nil {
		return toErrno(err)
	}
	if src.upper {
		if err := v.removeUpper(key, dir); err != nil {
			return toErrno(err)
		}
	}
	v.moveIno(key, "")
	if v.index.get(key) == entryOpaque {
		v.index.set(key, "")
	}
	if _, err := v.resolveLower(key); err == nil {
		return toErrno(v.index.set(key, entryWhiteout))
	}
	return 0
}

// removeUpper removes key's upper file, and forgets its number if it was
// the file's last name.
func (v *BranchView) removeUpper(key string, dir bool) error {
	a, err := atBeneath(v.upper, key)
	if err != nil {
		return err
	}
	defer a.close()
	ino, last := lastName(a)
	flags := 0
	if dir {
		flags = unix.AT_REMOVEDIR
	}
	if err := unix.Unlinkat(a.dir, a.name, flags); err != nil {
		return err // the file keeps its name, and its number
	}
	if last {
		v.forgetUpperIno(ino)
	}
	return nil
}

var _ = (fs.NodeLinker)((*bnode)(nil))

// Link links within the upper layer: the target is copied up first. (The
// mount over the view links a new file's temporary name to its name when
// a tool writes it.) The names are one inode, numbered by the upper file.
func (n *bnode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	from, to := target.(*bnode).key(), n.childKey(name)
	if _, err := n.v.resolve(to); err == nil {
		return nil, syscall.EEXIST
	}
	if err := n.v.copyUp(from, false); err != nil {
		return nil, toErrno(err)
	}
	if errno := n.v.linkUpper(from, to); errno != 0 {
		return nil, errno
	}
	n.v.unwhite(to)
	return n.child(ctx, to, out)
}

// linkUpper links the upper file from to the name to.
func (v *BranchView) linkUpper(from, to string) syscall.Errno {
	src, dst, errno := v.upperPair(from, to)
	if errno != 0 {
		return errno
	}
	defer src.close()
	defer dst.close()
	return toErrno(unix.Linkat(src.dir, src.name, dst.dir, dst.name, 0))
}

// makeUpper makes the entry key, absent from the view, in the upper
// layer with mk, given the directory to make it in and its name there.
func (v *BranchView) makeUpper(key string, mk func(dir int, name string) error) syscall.Errno {
	if _, err := v.resolve(key); err == nil {
		return syscall.EEXIST
	}
	a, errno := v.upperAt(key)
	if errno != 0 {
		return errno
	}
	defer a.close()
	return toErrno(mk(a.dir, a.name))
}

// upperPair opens the places of the upper file from, and of the name to
// (its parents made); the caller closes both.
func (v *BranchView) upperPair(from, to string) (src, dst at, errno syscall.Errno) {
	src, err := atBeneath(v.upper, from)
	if err != nil {
		return at{}, at{}, toErrno(err)
	}
	if dst, errno = v.upperAt(to); errno != 0 {
		src.close()
		return at{}, at{}, errno
	}
	return src, dst, 0
}
