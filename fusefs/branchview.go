package fusefs

// A branch view is the private filesystem a branch's ordinary mount stands
// on: a union of the branch's own layer (upper, a plain directory) over a
// snapshot of the workspace (versionstore.Snapshot). A path resolves to
//
//   - nothing, if the branch deleted it (a whiteout in the branch's index);
//   - the upper file, once the branch changed it;
//   - else the snapshot: the workspace's file if nothing changed it since
//     the branch point, or the bytes of its version then (frozen: written
//     out once from the object store into the branch's frozen directory).
//
// The first change to a file copies it up whole (branchcopyup.go); a
// truncating open or a truncation to zero copies nothing. A directory of the
// branch's own renames; one showing anything of the snapshot answers EXDEV
// (mv copies it) (branchrename.go). A link is made within the upper
// directory, and a file there is numbered by its inode, so its names are one
// node. The layers are worked on through directories opened one element at a
// time (branchopen.go): no symlink is followed, and paths of any length work.
// The view is served read-write to its owner only: the daemon mounts it in a
// 0700 directory, without allow_other, and versions nothing: the branch's
// ordinary dshfs mount over it does.

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// BranchView is a mounted branch view.
type BranchView struct {
	snap   *versionstore.Snapshot
	store  *versionstore.Store // the workspace's: the bytes of frozen versions
	lower  string              // the workspace's backing directory
	upper  string              // the branch's own files
	frozen string              // bytes of versions at the branch point, by version
	index  *branchIndex        // whiteouts and opaque directories
	server *fuse.Server
	mnt    string

	mu      sync.Mutex     // copy-ups and index changes
	writing map[string]int // open-for-write handles by path

	// The open handles by their node's number: a node unlinked while open
	// is answered for by one of its descriptors.
	handleMu sync.Mutex
	handles  map[uint64]map[*bfile]bool

	// A path keeps its inode number for as long as the view is served
	// (the kernel forgets nodes, and the mount over the view compares
	// numbers to find entries swapped under it); a file of the branch's
	// own layer is numbered by its inode there, so its hard links are one
	// inode, and keeps the number its path had before its copy-up.
	inoMu    sync.Mutex
	inos     map[string]uint64 // by path
	upperIno map[uint64]uint64 // by inode in the upper directory
	nextIno  uint64
}

// BranchViewOptions say where a branch view keeps its layer.
type BranchViewOptions struct {
	Upper  string // the branch's files
	Frozen string // the branch point's bytes of files changed since
	Index  string // the file recording whiteouts and opaque directories
	// CacheTimeout is how long the kernel may trust the view's entries and
	// attributes (0: 30 s): as long as the branch's mount over it trusts
	// its own.
	CacheTimeout time.Duration
	Debug        bool
}

// MountBranchView serves at mnt the union of o.Upper over snap.
func MountBranchView(mnt string, store *versionstore.Store, snap *versionstore.Snapshot, o BranchViewOptions) (*BranchView, error) {
	idx, err := loadBranchIndex(o.Index)
	if err != nil {
		return nil, err
	}
	if err := likeRoot(o.Upper, store.Root()); err != nil {
		return nil, err
	}
	v := newBranchView(store, snap, idx, o.Upper, o.Frozen)
	server, err := mountView(mnt, &bnode{v: v}, o)
	if err != nil {
		return nil, mountError(err)
	}
	v.server, v.mnt = server, mnt
	return v, nil
}

// newBranchView is the view of upper over snap, not mounted.
func newBranchView(store *versionstore.Store, snap *versionstore.Snapshot, idx *branchIndex, upper, frozen string) *BranchView {
	return &BranchView{snap: snap, store: store, lower: store.Root(), upper: upper, frozen: frozen, index: idx, writing: map[string]int{}, handles: map[uint64]map[*bfile]bool{},
		inos: map[string]uint64{}, upperIno: map[uint64]uint64{}, nextIno: 2}
}

// Unmount unmounts the view.
func (v *BranchView) Unmount() error {
	var err error
	for range 20 {
		if err = v.server.Unmount(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	if derr := detach(v.mnt); derr != nil {
		return fmt.Errorf("unmount branch view: %w", err)
	}
	return nil
}

// SettledWriting lists the paths open for writing in the branch, once
// those just closed are released (within grace: the kernel releases a file
// after its close has returned).
func (v *BranchView) SettledWriting(grace time.Duration) map[string]bool {
	for end := time.Now().Add(grace); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if w := v.Writing(); len(w) == 0 {
			return w
		}
	}
	return v.Writing()
}

// Writing lists the paths open for writing in the branch.
func (v *BranchView) Writing() map[string]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]bool{}
	for k, n := range v.writing {
		if n > 0 {
			out[k] = true
		}
	}
	return out
}

// Whiteouts lists the paths the branch deleted.
func (v *BranchView) Whiteouts() []string { return v.index.whiteouts() }

// source is where key's bytes are: an absolute path (upper, live or
// frozen), or ENOENT.
type source struct {
	path  string
	root  string // path is rel below root, a layer's directory: opened
	rel   string // through openBeneath, never following a symlink
	upper bool
	dir   bool                // a directory that exists only in the snapshot's history
	owner *versionstore.Owner // a frozen file's owner and bits then (its file's are not)
}

// open opens the source, following no symlink below its layer.
func (s source) open(flags int) (int, error) { return openBeneathFd(s.root, s.rel, flags) }

// lstat is the source's lstat, following no symlink below its layer.
func (s source) lstat(st *unix.Stat_t) error { return lstatBeneath(s.root, s.rel, st) }

// info is lstat as an os.FileInfo.
func (s source) info() (os.FileInfo, error) { return lstatInfo(s.root, s.rel) }

// resolve finds key in the view.
func (v *BranchView) resolve(key string) (source, error) {
	if v.index.hidden(key) {
		return source{}, syscall.ENOENT
	}
	var st unix.Stat_t
	if err := lstatBeneath(v.upper, key, &st); err == nil {
		return source{path: filepath.Join(v.upper, key), root: v.upper, rel: key, upper: true}, nil
	}
	if v.index.opaqueAbove(key) {
		return source{}, syscall.ENOENT
	}
	return v.resolveLower(key)
}

// resolveLower finds key in the snapshot.
func (v *BranchView) resolveLower(key string) (source, error) {
	if key == "." {
		return source{path: v.lower, root: v.lower, rel: "."}, nil
	}
	st, err := v.snap.State(key)
	if err != nil {
		return source{}, syscall.EIO
	}
	if !st.Changed {
		live := filepath.Join(v.lower, key)
		fi, err := lstatInfo(v.lower, key)
		if err != nil {
			return v.impliedDir(key)
		}
		if ver, owner, stale := v.snap.Stale(key, fi); stale {
			// Changed, not journaled yet: its bytes then, where kept.
			if p, err := v.freeze(ver); err == nil {
				return source{path: p, root: filepath.Dir(p), rel: filepath.Base(p), owner: owner}, nil
			}
		}
		return source{path: live, root: v.lower, rel: key}, nil
	}
	if st.Version.IsZero() {
		return v.impliedDir(key)
	}
	if st.Unknown {
		return source{}, syscall.EIO
	}
	p, err := v.freeze(st.Version)
	if err != nil {
		return source{}, syscall.EIO
	}
	return source{path: p, root: filepath.Dir(p), rel: filepath.Base(p), owner: st.Owner}, nil
}

// impliedDir is key as a directory that held files at the branch point and
// is gone from the workspace since.
func (v *BranchView) impliedDir(key string) (source, error) {
	d, err := v.snap.Drifted(parentKey(key))
	if err != nil || !d[path.Base(key)] {
		return source{}, syscall.ENOENT
	}
	return source{path: v.frozen, root: v.frozen, rel: ".", dir: true}, nil
}

// freeze writes out the bytes of version ver once, and names the file.
func (v *BranchView) freeze(ver versionstore.Version) (string, error) {
	p := filepath.Join(v.frozen, ver.String()[3:])
	if _, err := os.Lstat(p); err == nil {
		return p, nil
	}
	data, err := v.store.Object(ver)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(v.frozen, "tmp-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return p, err
}

func parentKey(key string) string {
	if d := path.Dir(key); d != "" {
		return d
	}
	return "."
}

// stat fills out with key's attributes.
func (v *BranchView) stat(key string, out *fuse.Attr) syscall.Errno {
	src, err := v.resolve(key)
	if err != nil {
		return toErrno(err)
	}
	var st unix.Stat_t
	if err := src.lstat(&st); err != nil {
		return toErrno(err)
	}
	fillAttr(out, &st)
	out.Ino = v.number(key, src.upper, &st)
	if o := src.owner; o != nil {
		out.Uid, out.Gid = o.Uid, o.Gid
		out.Mode = out.Mode&^0o7777 | uint32(o.Perm.Perm())
	}
	return 0
}

// track counts an open-for-write handle of key (delta +1 or -1).
func (v *BranchView) track(key string, delta int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.writing[key] += delta; v.writing[key] <= 0 {
		delete(v.writing, key)
	}
}

// handle makes a handle of fd, open on key, for the node numbered ino.
func (v *BranchView) handle(fd int, key string, ino uint64, writes bool) *bfile {
	h := &bfile{FileHandle: fs.NewLoopbackFile(fd), fd: fd, key: key, ino: ino, writes: writes}
	v.handleMu.Lock()
	defer v.handleMu.Unlock()
	if writes {
		v.track(key, 1)
	}
	if v.handles[ino] == nil {
		v.handles[ino] = map[*bfile]bool{}
	}
	v.handles[ino][h] = true
	return h
}

// release forgets the handle h, released.
func (v *BranchView) release(h *bfile) {
	v.handleMu.Lock()
	defer v.handleMu.Unlock()
	if h.writes {
		v.track(h.key, -1)
	}
	if delete(v.handles[h.ino], h); len(v.handles[h.ino]) == 0 {
		delete(v.handles, h.ino)
	}
}

// moveHandles gives the handles open on from, or below it, and their
// open-for-write counts, the paths they have once from is renamed to to.
func (v *BranchView) moveHandles(from, to string) {
	v.handleMu.Lock()
	defer v.handleMu.Unlock()
	for _, hs := range v.handles {
		for h := range hs {
			if k, ok := movedKey(h.key, from, to); ok {
				if h.writes {
					v.track(h.key, -1)
					v.track(k, 1)
				}
				h.key = k
			}
		}
	}
}

// movedKey is key once from is renamed to to, if key is from or below it.
func movedKey(key, from, to string) (string, bool) {
	if key == from || strings.HasPrefix(key, from+"/") {
		return to + key[len(from):], true
	}
	return key, false
}

// withFd runs do on the descriptor of a handle open on the node numbered
// ino, if one is: a handle released meanwhile is closed only after.
func (v *BranchView) withFd(ino uint64, do func(fd int) syscall.Errno) (syscall.Errno, bool) {
	v.handleMu.Lock()
	defer v.handleMu.Unlock()
	for h := range v.handles[ino] {
		return do(h.fd), true
	}
	return 0, false
}

// Changes lists what the branch changed, for a merge: every regular file
// of its own (with its bytes) and every file it deleted. Files open for
// writing in the branch are marked.
func (v *BranchView) Changes() ([]versionstore.BranchChange, error) {
	writing := v.SettledWriting(versionstore.MergeWriterGrace)
	var keys []string
	if err := v.upperFiles(".", &keys); err != nil {
		return nil, err
	}
	var out []versionstore.BranchChange
	for _, key := range keys {
		// Read below the layer, following no symlink: what the walk saw
		// may have been swapped for a link since.
		data, fi, err := readRegular(v.upper, key)
		if notReadable(err) {
			continue // no file to merge, as a symlink seen by the walk
		}
		if err != nil {
			return nil, err
		}
		out = append(out, versionstore.BranchChange{Key: key, Version: versionstore.Sum(data), Data: data, Perm: fi.Mode().Perm(), Writing: writing[key]})
	}
	for _, key := range v.index.whiteouts() {
		if src, err := v.resolveLower(key); err == nil && !src.dir {
			if fi, err := src.info(); err == nil && fi.Mode().IsRegular() {
				out = append(out, versionstore.BranchChange{Key: key})
			}
		}
	}
	return v.hiddenDeletions(out), nil
}

// hiddenDeletions adds to out a deletion of each regular file of the
// snapshot that a deleted or opaque directory hides, and that out does not
// list already (a file of the branch's own there, or a whiteout of its
// own). A directory's rename drops the whiteouts below its names, so the
// files below a directory's mark are found from the mark.
func (v *BranchView) hiddenDeletions(out []versionstore.BranchChange) []versionstore.BranchChange {
	listed := map[string]bool{}
	for _, c := range out {
		listed[c.Key] = true
	}
	for _, key := range v.index.marked(entryWhiteout, entryOpaque) {
		out = v.snapshotFiles(key, listed, out)
	}
	return out
}

// snapshotFiles adds a deletion of each regular file of the snapshot below
// directory key not listed yet.
func (v *BranchView) snapshotFiles(key string, listed map[string]bool, out []versionstore.BranchChange) []versionstore.BranchChange {
	names := map[string]uint32{}
	v.lowerNames(key, names)
	for name, mode := range names {
		k := path.Join(key, name)
		switch {
		case mode == syscall.S_IFDIR:
			out = v.snapshotFiles(k, listed, out)
		case mode == syscall.S_IFREG && !listed[k]:
			listed[k] = true
			out = append(out, versionstore.BranchChange{Key: k})
		}
	}
	return out
}

// upperFiles adds to keys the regular files below directory key of the
// upper directory, in lexical order, each directory opened below the layer
// (so a path of any length is walked).
func (v *BranchView) upperFiles(key string, keys *[]string) error {
	d, err := openBeneath(v.upper, key, unix.O_RDONLY|unix.O_DIRECTORY)
	if notReadable(err) {
		return nil // swapped for a symlink since the walk saw it
	}
	if err != nil {
		return err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		k := path.Join(key, e.Name())
		switch {
		case e.IsDir():
			if err := v.upperFiles(k, keys); err != nil {
				return err
			}
		case e.Type().IsRegular() && !strings.HasSuffix(k, copyUpSuffix):
			*keys = append(*keys, k)
		}
	}
	return nil
}

// number is the inode number of key, whose file (in the upper directory
// if upper is set) has the attributes st.
func (v *BranchView) number(key string, upper bool, st *unix.Stat_t) uint64 {
	v.inoMu.Lock()
	defer v.inoMu.Unlock()
	if !upper {
		return v.pathIno(key)
	}
	if ino, ok := v.upperIno[st.Ino]; ok {
		return ino
	}
	ino := v.pathIno(key)
	v.upperIno[st.Ino] = ino
	return ino
}

// forgetUpperIno forgets the number of the upper file of inode ino, whose
// last name is gone: the layer may give its inode to a file made later.
func (v *BranchView) forgetUpperIno(ino uint64) {
	v.inoMu.Lock()
	defer v.inoMu.Unlock()
	delete(v.upperIno, ino)
}

// lastName reports the inode of the upper file a names, and whether a is
// its last name (a directory has one).
func lastName(a at) (ino uint64, last bool) {
	var st unix.Stat_t
	if unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return 0, false
	}
	return st.Ino, st.Nlink <= 1 || st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// pathIno is key's number by path; inoMu is held.
func (v *BranchView) pathIno(key string) uint64 {
	ino, ok := v.inos[key]
	if !ok {
		ino = v.nextIno
		v.nextIno++
		v.inos[key] = ino
	}
	return ino
}

// moveIno gives to the inode number of from (a file renamed), or forgets
// from when to is "".
func (v *BranchView) moveIno(from, to string) {
	v.inoMu.Lock()
	defer v.inoMu.Unlock()
	ino, ok := v.inos[from]
	delete(v.inos, from)
	if ok && to != "" {
		v.inos[to] = ino
	}
}

// moveInos moves the numbers of directory from and of the paths below it
// to to, a directory renamed.
func (v *BranchView) moveInos(from, to string) {
	v.inoMu.Lock()
	defer v.inoMu.Unlock()
	moved := map[string]uint64{}
	for k, ino := range v.inos {
		if nk, ok := movedKey(k, from, to); ok {
			moved[nk] = ino
			delete(v.inos, k)
		}
	}
	for k := range v.inos {
		if strings.HasPrefix(k, to+"/") {
			delete(v.inos, k) // the replaced directory's: it was empty
		}
	}
	maps.Copy(v.inos, moved)
}

// likeRoot gives the upper directory, which is the view's root, the
// workspace root's owner and permission bits (it lies in a 0700 directory).
func likeRoot(upper, root string) error {
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		return err
	}
	if err := os.Chmod(upper, os.FileMode(st.Mode&0o7777)); err != nil {
		return err
	}
	return os.Lchown(upper, int(st.Uid), int(st.Gid))
}
