package fusefs

import (
	"context"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is one file, directory or link of the backing tree. It holds no
// descriptor: every operation opens its directory by walking from the root
// descriptor with openat, so no absolute path (and no PATH_MAX) is involved
// and a node renamed meanwhile is found where the tree says it is now.
type node struct {
	fs.Inode
	fsys *FS

	mu     sync.Mutex
	cached cacheStamp   // the file as the kernel's page cache last knew it
	gone   *unix.Stat_t // the entry as it was removed from the tree, see removed
}

// removed remembers the attributes of the entry n was (st, stat just before
// it was removed), with its link gone: a directory a process still holds
// open, or works in, has no name left to stat by, and the kernel asks for
// its attributes again after the removal.
func (n *node) removed(st *unix.Stat_t) {
	gone := *st
	if isDir(&gone) || gone.Nlink == 0 {
		gone.Nlink = 0
	} else {
		gone.Nlink--
	}
	n.mu.Lock()
	n.gone = &gone
	n.mu.Unlock()
}

// goneStat is what removed remembered, while n is out of the tree. A node
// back in it (its inode number given to a new entry) forgets it.
func (n *node) goneStat() (*unix.Stat_t, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.gone == nil {
		return nil, false
	}
	if _, in := n.relPath(); in {
		n.gone = nil
		return nil, false
	}
	return n.gone, true
}

// cacheStamp identifies a file's content for the page cache: the same
// stamp at the next open means nothing changed it behind the kernel's back.
type cacheStamp struct {
	size, mtime, ctime int64
	settled            bool // taken long enough after ctime to prove anything
}

// cacheRacyWindow: a stamp taken this soon after the file's ctime may not
// show a same-size write landing in the same timestamp tick (the kernel's
// coarse clock ticks every few milliseconds), so it cannot keep the cache.
const cacheRacyWindow = 100 * time.Millisecond

// keepCache reports whether the kernel may keep its cached pages of the
// open file fd (unchanged since the kernel last saw it) and remembers its
// stamp. Writes through the mount keep the kernel's pages current; only a
// change made straight into the backing directory drops them.
func (n *node) keepCache(fd int) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return false
	}
	settled := time.Now().UnixNano()-max(st.Mtim.Nano(), st.Ctim.Nano()) > int64(cacheRacyWindow)
	stamp := cacheStamp{st.Size, st.Mtim.Nano(), st.Ctim.Nano(), settled}
	n.mu.Lock()
	defer n.mu.Unlock()
	keep := n.cached == stamp && n.cached.settled
	n.cached = stamp
	return keep
}

var _ = (fs.InodeEmbedder)((*node)(nil))

func itoa(i int) string { return strconv.Itoa(i) }

// relPath is the node's workspace-relative path ("" for the root), or
// false for a node no longer in the tree (unlinked while open).
func (n *node) relPath() (string, bool) {
	var segs []string
	root := n.fsys.root.EmbeddedInode()
	for p := n.EmbeddedInode(); p != root; {
		name, parent := n.fsys.writers.parentOf(p)
		if parent == nil {
			return "", false
		}
		segs = append(segs, name)
		p = parent
	}
	for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
		segs[i], segs[j] = segs[j], segs[i]
	}
	return strings.Join(segs, "/"), true
}

// noteSelf tells the watcher the daemon is changing n itself.
func (n *node) noteSelf() {
	if n.fsys.watch == nil {
		return
	}
	if key, ok := n.key(); ok {
		n.fsys.noteSelfKey(key)
	}
}

// noteSelfKey tells the watcher the daemon is changing the file at key.
func (f *FS) noteSelfKey(key string) {
	if f.watch == nil || key == "." {
		return
	}
	dir, name := path.Split(key)
	f.watch.noteSelf(strings.TrimSuffix(dir, "/"), name)
}

// noteSelfChild tells the watcher the daemon is changing n's entry name.
func (n *node) noteSelfChild(name string) {
	if n.fsys.watch == nil {
		return
	}
	if p, ok := n.relPath(); ok {
		n.fsys.watch.noteSelf(p, name)
	}
}

// key is the node's versionstore key.
func (n *node) key() (string, bool) {
	p, ok := n.relPath()
	if p == "" {
		p = "."
	}
	return p, ok
}

func (n *node) childKey(name string) (string, bool) {
	p, ok := n.relPath()
	if !ok {
		return "", false
	}
	if p == "" {
		return name, true
	}
	return p + "/" + name, true
}

// openDir opens the directory at rel (relative to the root) for *at calls.
// The returned close function must be called.
func (f *FS) openDir(rel string) (int, func(), error) {
	fd := f.rootFd
	for _, c := range splitKey(rel) {
		next, err := unix.Openat(fd, c, oPath|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if fd != f.rootFd {
			unix.Close(fd)
		}
		if err != nil {
			return -1, nil, err
		}
		fd = next
	}
	if fd == f.rootFd {
		return fd, func() {}, nil
	}
	return fd, func() { unix.Close(fd) }, nil
}

// dirFd opens n itself as a directory, for an operation on its entries:
// the directory the kernel means by n (see identity.go), else ESTALE.
func (n *node) dirFd() (int, func(), syscall.Errno) {
	p, ok := n.relPath()
	if !ok {
		return -1, nil, syscall.ENOENT
	}
	fd, done, err := n.fsys.openDir(p)
	if err != nil {
		return -1, nil, toErrno(err)
	}
	if errno := n.sameInode(fd); errno != 0 {
		done()
		return -1, nil, errno
	}
	return fd, done, 0
}

// at opens n's parent directory and returns it with n's name in it. The
// root is named "." in itself.
func (n *node) at() (int, string, func(), syscall.Errno) {
	p, ok := n.relPath()
	if !ok {
		return -1, "", nil, syscall.ENOENT
	}
	dir, name := "", "."
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	} else if p != "" {
		name = p
	}
	fd, done, err := n.fsys.openDir(dir)
	return fd, name, done, toErrno(err)
}

// newChild makes the inode for a backing entry named by st.
func (n *node) newChild(ctx context.Context, st *unix.Stat_t, gen uint64) *fs.Inode {
	return n.NewInode(ctx, &node{fsys: n.fsys}, fs.StableAttr{Mode: uint32(st.Mode), Ino: st.Ino, Gen: gen})
}

// fillAttr copies a stat into a FUSE attribute. unix.Stat_t and
// syscall.Stat_t are the same kernel structure on every supported platform.
func fillAttr(out *fuse.Attr, st *unix.Stat_t) {
	out.FromStat((*syscall.Stat_t)(unsafe.Pointer(st)))
}

// writer is the identity of the process making a FUSE request.
func writer(ctx context.Context) versionstore.Writer {
	w := versionstore.Writer{Kind: versionstore.WriterMount}
	if c, ok := fuse.FromContext(ctx); ok {
		w.Pid, w.Uid = c.Pid, c.Uid
		if c.Pid != 0 {
			w.Comm = comm(c.Pid)
		}
	}
	return w
}

// comm is a process's command name, or "" if it is gone.
func comm(pid uint32) string {
	b := make([]byte, 64)
	fd, err := unix.Open("/proc/"+strconv.FormatUint(uint64(pid), 10)+"/comm", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	k, _ := unix.Read(fd, b)
	return strings.TrimRight(string(b[:max(k, 0)]), "\n")
}

var _ = (fs.NodeLookuper)((*node)(nil))

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		// In an unwatched directory the entry's timeout is set, so the
		// missing name is answered ENOENT rather than cached as missing.
		n.setEntryTimeout(out)
		return nil, toErrno(err)
	}
	fillAttr(&out.Attr, &st)
	n.setEntryTimeout(out)
	child := n.newChild(ctx, &st, generation(fd, name))
	if c, ok := child.Operations().(*node); ok && c.writtenBehind() {
		out.SetAttrTimeout(uncached)
	}
	return child, 0
}

// writtenBehind reports whether n's backing file may change with no request
// the daemon sees: it is open for writing (or still mapped, see mapped.go)
// in passthrough mode, where the kernel writes the backing file itself and a
// shared mapping's writes reach it with no request at all. Its attributes
// are then given no cache time (uncached): the kernel would answer a stat
// asking for the times alone (statx, as stat(1) does) from ones cached
// before the writes.
func (n *node) writtenBehind() bool {
	if !n.fsys.Passthrough() {
		return false
	}
	_, writing := n.fsys.writers.keyOf(n)
	return writing
}

var _ = (fs.NodeGetattrer)((*node)(nil))

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if t := n.attrTimeout(); t != n.fsys.timeout {
		out.SetTimeout(t)
	}
	if n.writtenBehind() {
		out.SetTimeout(uncached)
	}
	if h, ok := f.(*handle); ok {
		return h.Getattr(ctx, out)
	}
	if st, ok := n.goneStat(); ok {
		fillAttr(&out.Attr, st)
		return 0
	}
	fd, name, done, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer done()
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return toErrno(err)
	}
	fillAttr(&out.Attr, &st)
	return 0
}

var _ = (fs.NodeReadlinker)((*node)(nil))

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	fd, name, done, errno := n.at()
	if errno != 0 {
		return nil, errno
	}
	defer done()
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		k, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return nil, toErrno(err)
		}
		if k < size {
			return buf[:k], 0
		}
	}
}

var _ = (fs.NodeStatfser)((*node)(nil))

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(n.fsys.rootFd, &st); err != nil {
		return toErrno(err)
	}
	out.FromStatfsT(&st)
	return 0
}

var _ = (fs.NodeOpendirHandler)((*node)(nil))

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fd, done, errno := n.dirFd()
	if errno != 0 {
		return nil, 0, errno
	}
	defer done()
	dfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, toErrno(err)
	}
	ds, errno := fs.NewLoopbackDirStreamFd(dfd)
	// The kernel may cache the listing: its own changes to the directory
	// drop it, and so does a changed mtime when it revalidates attributes,
	// which is how a change made straight into the backing tree shows.
	return ds, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, errno
}
