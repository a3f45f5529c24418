package fusefs

import (
	"context"
	"path"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// bnode is a path in a branch view; every operation resolves it anew, so a
// node keeps its inode number across its copy-up. A node unlinked while
// open has no path: its open handles answer for it.
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
	// A hard link's names have one number: the bridge answers the
	// node it has for the number, not this one.
	return n.NewInode(ctx, &bnode{v: n.v}, fs.StableAttr{Mode: out.Attr.Mode & syscall.S_IFMT, Ino: out.Attr.Ino}), 0
}

var _ = (fs.NodeLookuper)((*bnode)(nil))

func (n *bnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	// The kernel leaves NAME_MAX to the filesystem, and the layers would
	// answer ENOENT for such a name (or refuse it only when it is made).
	if len(name) > nameMax {
		return nil, syscall.ENAMETOOLONG
	}
	return n.child(ctx, n.childKey(name), out)
}

// nameMax is the longest name of a directory entry.
const nameMax = 255

var _ = (fs.NodeGetattrer)((*bnode)(nil))

func (n *bnode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	errno, orphan := n.onOrphan(f, func(fd int) syscall.Errno { return fstatAttr(fd, &out.Attr) })
	if !orphan {
		errno = n.v.stat(n.key(), &out.Attr)
	}
	out.Ino = n.StableAttr().Ino // the node's, before and after its copy-up
	return errno
}

// onOrphan runs do on a descriptor of the node's file if the node has no
// name left (unlinked while open): f's, else any open handle's.
func (n *bnode) onOrphan(f fs.FileHandle, do func(fd int) syscall.Errno) (syscall.Errno, bool) {
	if n.IsRoot() {
		return 0, false
	}
	if _, parent := n.Parent(); parent != nil {
		return 0, false
	}
	if b, ok := f.(*bfile); ok {
		return do(b.fd), true
	}
	if errno, ok := n.v.withFd(n.StableAttr().Ino, do); ok {
		return errno, true
	}
	return syscall.ENOENT, true
}

func fstatAttr(fd int, out *fuse.Attr) syscall.Errno {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return toErrno(err)
	}
	fillAttr(out, &st)
	return 0
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
	return n.v.handle(fd, key, n.StableAttr().Ino, writes), viewOpenFlags, 0
}

// viewOpenFlags are the FOPEN flags of the view's handles. No close of
// one waits for the view (FOPEN_NOFLUSH): a close at the daemon's exit —
// of a descriptor the branch's mount kept because its release was lost at
// its unmount — would wait for ever for a server gone with the process. A
// flush has nothing to do here: the view's bytes are in its layer's files
// from each write, and a release ends a writer.
const viewOpenFlags = fuse.FOPEN_NOFLUSH

// bfile is a handle of the view on its descriptor fd, open on key, whose
// node has the number ino. One open for writing (writes) the view counts
// until it is released.
type bfile struct {
	fs.FileHandle
	fd     int
	key    string
	ino    uint64
	writes bool
}

var _ = (fs.NodeReleaser)((*bnode)(nil))

func (n *bnode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if b, ok := f.(*bfile); ok {
		n.v.release(b)
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

var _ = (fs.NodeSetattrer)((*bnode)(nil))

func (n *bnode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	errno, orphan := n.onOrphan(f, func(fd int) syscall.Errno {
		if errno := setattrPath(fdPath(fd), in); errno != 0 {
			return errno
		}
		return fstatAttr(fd, &out.Attr)
	})
	if !orphan {
		errno = n.v.setattr(n.key(), in, &out.Attr)
	}
	out.Ino = n.StableAttr().Ino
	return errno
}

// setattr applies in's changes to key, copied up first, and fills out
// with its attributes then.
func (v *BranchView) setattr(key string, in *fuse.SetAttrIn, out *fuse.Attr) syscall.Errno {
	size, truncates := in.GetSize()
	if err := v.copyUp(key, truncates && size == 0); err != nil {
		return toErrno(err)
	}
	fd, err := openBeneathFd(v.upper, key, oPath)
	if err != nil {
		return toErrno(err)
	}
	errno := setattrPath(fdPath(fd), in)
	unix.Close(fd)
	if errno != 0 {
		return errno
	}
	return v.stat(key, out)
}

// setattrPath applies in's changes to the file at p, a descriptor's path
// in /proc (fdPath): a symlink's own mode, owner and times.
func setattrPath(p string, in *fuse.SetAttrIn) syscall.Errno {
	if m, ok := in.GetMode(); ok {
		if err := syscall.Chmod(p, m&07777); err != nil {
			return toErrno(err)
		}
	}
	if u, g, ok := setattrOwner(in); ok {
		if err := syscall.Chown(p, u, g); err != nil {
			return toErrno(err)
		}
	}
	if sz, ok := in.GetSize(); ok {
		if err := syscall.Truncate(p, int64(sz)); err != nil {
			return toErrno(err)
		}
	}
	if ts := setattrTimes(in); ts != nil {
		return toErrno(unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0))
	}
	return 0
}
