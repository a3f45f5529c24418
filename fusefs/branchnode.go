package fusefs

import (
	"context"
	"path"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// bnode is a path in a branch view; every operation resolves it anew, so a
// node keeps its inode number across its copy-up.
type bnode struct {
	fs.Inode
	v *BranchView
}

func (n *bnode) key() string {
	if p := n.Path(n.Root()); p != "" {
		return p
	}
	return "."
}

func (n *bnode) childKey(name string) string { return path.Join(n.key(), name) }

func (n *bnode) child(ctx context.Context, key string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.v.stat(key, &out.Attr); errno != 0 {
		return nil, errno
	}
	c := &bnode{v: n.v}
	ino := n.v.inoOf(key)
	out.Attr.Ino = ino
	return n.NewInode(ctx, c, fs.StableAttr{Mode: out.Attr.Mode & syscall.S_IFMT, Ino: ino}), 0
}

var _ = (fs.NodeLookuper)((*bnode)(nil))

func (n *bnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.child(ctx, n.childKey(name), out)
}

var _ = (fs.NodeGetattrer)((*bnode)(nil))

func (n *bnode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	errno := n.v.stat(n.key(), &out.Attr)
	out.Ino = n.StableAttr().Ino // the node's, before and after its copy-up
	return errno
}

var _ = (fs.NodeReaddirer)((*bnode)(nil))

func (n *bnode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	names, errno := n.v.list(n.key())
	if errno != 0 {
		return nil, errno
	}
	return fs.NewListDirStream(names), 0
}

var _ = (fs.NodeOpener)((*bnode)(nil))

func (n *bnode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	key := n.key()
	writes := flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 || flags&syscall.O_TRUNC != 0
	if writes {
		if err := n.v.copyUp(key, flags&syscall.O_TRUNC != 0); err != nil {
			return nil, 0, toErrno(err)
		}
	}
	src, err := n.v.resolve(key)
	if err != nil {
		return nil, 0, toErrno(err)
	}
	fd, err := src.open(int(flags) &^ syscall.O_CREAT)
	if err != nil {
		return nil, 0, toErrno(err)
	}
	if writes {
		n.v.track(key, 1)
		return &bfile{FileHandle: fs.NewLoopbackFile(fd), key: key}, 0, 0
	}
	return fs.NewLoopbackFile(fd), 0, 0
}

// bfile is a handle open for writing: the view counts it until released.
type bfile struct {
	fs.FileHandle
	key string
}

var _ = (fs.NodeReleaser)((*bnode)(nil))

func (n *bnode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if b, ok := f.(*bfile); ok {
		n.v.track(b.key, -1)
		f = b.FileHandle
	}
	if r, ok := f.(fs.FileReleaser); ok {
		return r.Release(ctx)
	}
	return 0
}

var _ = (fs.NodeReader)((*bnode)(nil))

func (n *bnode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return inner(f).(fs.FileReader).Read(ctx, dest, off)
}

var _ = (fs.NodeWriter)((*bnode)(nil))

func (n *bnode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	return inner(f).(fs.FileWriter).Write(ctx, data, off)
}

var _ = (fs.NodeFsyncer)((*bnode)(nil))

func (n *bnode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if f == nil {
		return 0
	}
	return inner(f).(fs.FileFsyncer).Fsync(ctx, flags)
}

var _ = (fs.NodeFlusher)((*bnode)(nil))

func (n *bnode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	return inner(f).(fs.FileFlusher).Flush(ctx)
}

var _ = (fs.NodeLseeker)((*bnode)(nil))

func (n *bnode) Lseek(ctx context.Context, f fs.FileHandle, off uint64, whence uint32) (uint64, syscall.Errno) {
	return inner(f).(fs.FileLseeker).Lseek(ctx, off, whence)
}

var _ = (fs.NodeAllocater)((*bnode)(nil))

func (n *bnode) Allocate(ctx context.Context, f fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	return inner(f).(fs.FileAllocater).Allocate(ctx, off, size, mode)
}

func inner(f fs.FileHandle) fs.FileHandle {
	if b, ok := f.(*bfile); ok {
		return b.FileHandle
	}
	return f
}

var _ = (fs.NodeReadlinker)((*bnode)(nil))

func (n *bnode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	src, err := n.v.resolve(n.key())
	if err != nil {
		return nil, toErrno(err)
	}
	target, err := readlinkBeneath(src.root, src.rel)
	if err != nil {
		return nil, toErrno(err)
	}
	return []byte(target), 0
}

var _ = (fs.NodeStatfser)((*bnode)(nil))

func (n *bnode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.v.upper, &st); err != nil {
		return toErrno(err)
	}
	out.FromStatfsT(&st)
	return 0
}

// upperPath is key's path in the upper directory, its parents made there.
func (n *bnode) upperPath(key string) (string, syscall.Errno) {
	n.v.mu.Lock()
	defer n.v.mu.Unlock()
	if err := n.v.upperParents(key); err != nil {
		return "", toErrno(err)
	}
	return filepath.Join(n.v.upper, key), 0
}

var _ = (fs.NodeSetattrer)((*bnode)(nil))

func (n *bnode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	key := n.key()
	size, truncates := in.GetSize()
	if err := n.v.copyUp(key, truncates && size == 0); err != nil {
		return toErrno(err)
	}
	p := filepath.Join(n.v.upper, key)
	if errno := setattrPath(p, in); errno != 0 {
		return errno
	}
	errno := n.v.stat(key, &out.Attr)
	out.Ino = n.StableAttr().Ino
	return errno
}

// setattrPath applies in's changes to the file at p.
func setattrPath(p string, in *fuse.SetAttrIn) syscall.Errno {
	if m, ok := in.GetMode(); ok {
		if err := syscall.Chmod(p, m&07777); err != nil {
			return toErrno(err)
		}
	}
	if u, g, ok := setattrOwner(in); ok {
		if err := syscall.Lchown(p, u, g); err != nil {
			return toErrno(err)
		}
	}
	if sz, ok := in.GetSize(); ok {
		if err := syscall.Truncate(p, int64(sz)); err != nil {
			return toErrno(err)
		}
	}
	if ts := setattrTimes(in); ts != nil {
		return toErrno(unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
	}
	return 0
}
