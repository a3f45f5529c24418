//go:build linux

package fusefs

// TestFsx is a randomized differential test of the mount's data path, in
// the manner of xfstests' fsx: a seeded sequence of operations on a few
// files through the mount — open with every access mode, O_APPEND and
// O_TRUNC, write, pwrite (past EOF, leaving holes; on an O_APPEND descriptor,
// where Linux appends), O_APPEND writes, read, lseek, ftruncate and
// truncate(2) (grow and shrink), fallocate (allocate, KEEP_SIZE, PUNCH_HOLE,
// ZERO_RANGE with and without KEEP_SIZE), copy_file_range from the other
// file and within the same one, MAP_SHARED mappings written through memory
// (msync'd or not, some outliving the close(2) of their descriptor and
// written after it), dup'd descriptors closed in any order, close and
// reopen, fsync and fdatasync — applied to an in-memory model as well. The
// mappings are made and written by a child process, the mapper (see
// below), from the same open file descriptions.
//
// After every operation each file's bytes read through the mount, its size
// (fstat and stat), every live mapping's view of it and, when no mapping
// holds unwritten pages, its bytes in the backing directory must equal the
// model. At quiescent points (every descriptor closed, every mapping
// unmapped — after a last write through each mapping, whose descriptor is
// closed by then — and the releases, which the kernel sends after close(2)
// returns, committed: no dirty mark left) the newest version in the
// store's history must be versionstore.Sum(model) of the right size, its
// bytes kept and equal to the model, no version attributed to an external
// writer, and the store's read (read_image's) must see the same version.
// Each quiescent point comes after every descriptor's fsync, which commits
// the files, and then one more change (commitThenChange): a change the
// daemon did not see cannot hide behind a later flush's rehash. A write
// that escapes the daemon — the writes kernel passthrough would hide, a
// mapping written after close — fails the check.
//
// The default run (3 seeds × 400 operations, fixed seeds) is part of make
// test. DSHFS_FSX_OPS sets the operations per seed; DSHFS_FSX_SEED=S replays
// seed S; DSHFS_FSX_SEEDS=N runs N seeds from S (or from a random seed,
// logged). make stress runs DSHFS_FSX_OPS=20000. A failure names the seed,
// the step, the last operations and the command that replays it.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// fsxMode is one way of mounting the workspace: every mode runs the same
// sequences and the same checks.
type fsxMode struct {
	name string
	opts []func(*Options)
	// branch runs the sequences in a branch of a workspace
	// (fsx_branch_test.go), on files it starts with.
	branch bool
}

// fsxModes are the mounts TestFsx runs against: kernel passthrough (as
// root; the kernel writes the backing file itself, sends no WRITE and maps
// the backing file in place of the FUSE one, so a mapping written after its
// descriptors' close reaches the daemon only through the lease probe of
// mapped.go) and write-through (every WRITE, mmap writeback included with
// pid 0, reaches the daemon). Without passthrough (not root, or
// DSHFS_TEST_PASSTHROUGH=off) the first is the second.
func fsxModes() []fsxMode {
	through := fsxMode{name: "writethrough", opts: []func(*Options){func(o *Options) { o.NoPassthrough = true }}}
	if testNoPassthrough || !passthroughPossible() {
		return []fsxMode{through}
	}
	return []fsxMode{{name: "passthrough", opts: []func(*Options){func(o *Options) { o.NoPassthrough = false }}}, through}
}

// Op kinds turned off because they find a dshfs bug (so main stays green)
// would be listed here as constants, each with a comment naming the bug
// and the test that shows it. None is off.

const (
	fsxMaxLen  = 256 << 10 // no operation reaches past this offset
	fsxMaxOp   = 64 << 10  // the longest write, copy, fallocate or mapping
	fsxMaxFds  = 6         // descriptors open at once
	fsxMaxMaps = 4         // mappings alive at once
	fsxLogLen  = 40        // operations shown on failure

	fsxDefaultOps = 400
)

var fsxDefaultSeeds = []int64{1, 2, 3}

func TestFsx(t *testing.T) {
	runFsxModes(t, fsxModes())
}

// runFsxModes runs the configured seeds in each mode.
func runFsxModes(t *testing.T, modes []fsxMode) {
	ops, seeds := fsxConfig(t)
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			counts := map[string]int{}
			for _, seed := range seeds {
				t.Run("seed="+strconv.FormatInt(seed, 10), func(t *testing.T) {
					for k, n := range runFsx(t, mode, seed, ops) {
						counts[k] += n
					}
				})
			}
			if ops*len(seeds) < 1000 || t.Failed() {
				return
			}
			for _, name := range fsxLastChanges {
				if counts["last change: "+name] == 0 {
					t.Errorf("no seed made %s the last change before a quiescent check: the test does not show that the daemon sees it", name)
				}
			}
		})
	}
}

// fsxConfig reads DSHFS_FSX_OPS, DSHFS_FSX_SEED and DSHFS_FSX_SEEDS.
func fsxConfig(t *testing.T) (ops int, seeds []int64) {
	t.Helper()
	env := func(name string) (int64, bool) {
		s := os.Getenv(name)
		if s == "" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an integer", name, s)
		}
		if name != "DSHFS_FSX_SEED" && n <= 0 {
			t.Fatalf("%s=%q: want a positive integer", name, s)
		}
		return n, true
	}
	ops = fsxDefaultOps
	if n, ok := env("DSHFS_FSX_OPS"); ok {
		ops = int(n)
	}
	first, seeded := env("DSHFS_FSX_SEED")
	count, counted := env("DSHFS_FSX_SEEDS")
	switch {
	case !seeded && !counted:
		return ops, fsxDefaultSeeds
	case !counted:
		count = 1
	case !seeded:
		first = time.Now().UnixNano() % 1e9
		t.Logf("DSHFS_FSX_SEEDS=%d: seeds %d to %d", count, first, first+count-1)
	}
	for i := range count {
		seeds = append(seeds, first+i)
	}
	return ops, seeds
}

// fsxFile is one file of the workspace and its model.
type fsxFile struct {
	name   string
	data   []byte // what the file must hold
	reader int    // a read-only descriptor the checks read through, or -1
}

// fsxOfd is an open file description: what dup'd descriptors share.
type fsxOfd struct {
	id    int
	f     *fsxFile
	flags int
	pos   int64
	fds   int // descriptors referring to it
}

func (o *fsxOfd) readable() bool { return o.flags&unix.O_ACCMODE != unix.O_WRONLY }
func (o *fsxOfd) writable() bool { return o.flags&unix.O_ACCMODE != unix.O_RDONLY }
func (o *fsxOfd) appends() bool  { return o.flags&unix.O_APPEND != 0 }

func (o *fsxOfd) String() string {
	s := map[int]string{unix.O_RDONLY: "RDONLY", unix.O_WRONLY: "WRONLY", unix.O_RDWR: "RDWR"}[o.flags&unix.O_ACCMODE]
	if o.appends() {
		s += "|APPEND"
	}
	return fmt.Sprintf("ofd%d(%s %s)", o.id, o.f.name, s)
}

type fsxFd struct {
	fd int
	o  *fsxOfd
}

func (d *fsxFd) String() string { return fmt.Sprintf("fd%d=%v", d.fd, d.o) }

// fsxMap is a MAP_SHARED, PROT_READ|PROT_WRITE mapping of [off, off+len),
// held by the mapper process.
type fsxMap struct {
	id  int
	o   *fsxOfd // the description it was made from; it may have no descriptor left
	off int64
	len int
	// dirty: written through memory since the kernel last wrote the file's
	// pages back, so the backing file may lag behind the page cache.
	dirty bool
}

func (mp *fsxMap) String() string {
	return fmt.Sprintf("map%d(%s [%d,+%d))", mp.id, mp.o.f.name, mp.off, mp.len)
}

type fsxRun struct {
	t     *testing.T
	m     *mounted
	mode  fsxMode
	seed  int64
	ops   int
	rng   *rand.Rand
	step  int
	files []*fsxFile
	fds   []*fsxFd
	maps  []*fsxMap
	ids   int
	page  int

	mapper *fsxMapper
	// existingOnly: operations use the descriptors open, or do nothing.
	existingOnly bool
	buf          []byte // preadAll's
	log          []string
	counts       map[string]int
}

type fsxOp struct {
	name   string
	weight int
	run    func(r *fsxRun, f *fsxFile) bool // false: not applicable now
}

// fsxOps is set by init: quiesce, one of them, runs others.
var fsxOps []fsxOp

func init() {
	fsxOps = []fsxOp{
		{"open", 6, (*fsxRun).opOpen},
		{"close", 5, (*fsxRun).opClose},
		{"dup", 3, (*fsxRun).opDup},
		{"reopen", 3, (*fsxRun).opReopen},
		{"write", 10, (*fsxRun).opWrite},
		{"pwrite", 12, (*fsxRun).opPwrite},
		{"append", 6, (*fsxRun).opAppend},
		{"read", 3, (*fsxRun).opRead},
		{"lseek", 3, (*fsxRun).opSeek},
		{"ftruncate", 5, (*fsxRun).opFtruncate},
		{"truncate", 2, (*fsxRun).opTruncatePath},
		{"fallocate", 8, (*fsxRun).opFallocate},
		{"copy_file_range", 6, (*fsxRun).opCopyRange},
		{"mmap", 4, (*fsxRun).opMmap},
		{"mmap-write", 10, (*fsxRun).opMmapWrite},
		{"msync", 3, (*fsxRun).opMsync},
		{"munmap", 3, (*fsxRun).opMunmap},
		{"fsync", 4, (*fsxRun).opFsync},
		{"quiesce", 3, (*fsxRun).opQuiesce},
	}
}

// Counted beside the op kinds: the cases the test exists for.
const (
	fsxMmapAfterClose    = "mmap-write after close"  // through a mapping whose descriptors are all closed
	fsxQuiesceAfterClose = "quiesce after late mmap" // a quiescent check following such a write
)

// runFsx runs ops operations from seed, and returns how many of each kind.
func runFsx(t *testing.T, mode fsxMode, seed int64, ops int) map[string]int {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6473686673))
	var m *mounted
	var start map[string][]byte // the files a branch starts with
	if mode.branch {
		m, start = fsxBranch(t, rng, mode.opts...)
	} else {
		m = mountT(t, mode.opts...)
	}
	if want := strings.HasSuffix(mode.name, "passthrough"); m.fs.Passthrough() != want {
		t.Fatalf("mode %s: passthrough %v", mode.name, m.fs.Passthrough())
	}
	r := &fsxRun{
		t: t, m: m, mode: mode, seed: seed, ops: ops,
		rng:    rng,
		page:   unix.Getpagesize(),
		counts: map[string]int{},
	}
	t.Cleanup(r.teardown) // before the unmount: cleanups run last first
	var err error
	if r.mapper, err = startMapper(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if data, ok := start[name]; ok {
			r.adopt(name, data)
		} else {
			r.files = append(r.files, r.create(name))
		}
	}
	if mode.branch {
		r.files = append(r.files, r.create("c")) // new in the branch
	}
	r.quiesce()
	for r.step = 1; r.step <= ops; r.step++ {
		r.do()
		r.checkAll()
	}
	r.step = ops // the last check is the last step's
	r.quiesce()
	r.checkCoverage()
	t.Logf("seed %d: %d operations: %v", seed, ops, r.counts)
	return r.counts
}

func (r *fsxRun) create(name string) *fsxFile {
	f := &fsxFile{name: name, reader: -1}
	fd, err := unix.Open(r.mntPath(f), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		r.fatalf("create %s: %v", name, err)
	}
	b := r.bytes(r.rng.IntN(fsxMaxOp))
	if n, err := unix.Write(fd, b); err != nil || n != len(b) {
		r.fatalf("write %s: %d, %v", name, n, err)
	}
	unix.Close(fd)
	f.data = b
	r.note("create %s with %d bytes", name, len(b))
	return f
}

func (r *fsxRun) mntPath(f *fsxFile) string     { return filepath.Join(r.m.mnt, f.name) }
func (r *fsxRun) backingPath(f *fsxFile) string { return filepath.Join(r.m.backing, f.name) }

// do runs one operation, chosen by weight, on a file chosen at random (the
// first three times in four).
func (r *fsxRun) do() {
	total := 0
	for _, op := range fsxOps {
		total += op.weight
	}
	for {
		f := r.files[0]
		if r.rng.IntN(4) == 0 {
			f = r.files[1]
		}
		k := r.rng.IntN(total)
		for _, op := range fsxOps {
			if k -= op.weight; k < 0 {
				if op.run(r, f) {
					r.counts[op.name]++
					return
				}
				break
			}
		}
	}
}

// --- descriptors ---

func (r *fsxRun) pickFd(f *fsxFile, ok func(*fsxOfd) bool) *fsxFd {
	var c []*fsxFd
	for _, d := range r.fds {
		if (f == nil || d.o.f == f) && (ok == nil || ok(d.o)) {
			c = append(c, d)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[r.rng.IntN(len(c))]
}

// fdFor returns a descriptor of f for which ok holds, opening one with
// flags (a random fd is closed first if too many are open), unless
// r.existingOnly: then nil if none is open.
func (r *fsxRun) fdFor(f *fsxFile, ok func(*fsxOfd) bool, flags int) *fsxFd {
	if r.existingOnly {
		return r.pickFd(f, ok)
	}
	if d := r.pickFd(f, ok); d != nil && r.rng.IntN(8) != 0 {
		return d
	}
	if len(r.fds) >= fsxMaxFds {
		r.closeFd(r.fds[r.rng.IntN(len(r.fds))])
	}
	return r.open(f, flags)
}

func (r *fsxRun) open(f *fsxFile, flags int) *fsxFd {
	fd, err := unix.Open(r.mntPath(f), flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		r.fatalf("open %s %#o: %v", f.name, flags, err)
	}
	r.ids++
	d := &fsxFd{fd: fd, o: &fsxOfd{id: r.ids, f: f, flags: flags &^ (unix.O_TRUNC | unix.O_CREAT), fds: 1}}
	if flags&unix.O_TRUNC != 0 {
		f.data = f.data[:0]
	}
	r.fds = append(r.fds, d)
	r.note("open %s trunc=%v -> %v", f.name, flags&unix.O_TRUNC != 0, d)
	if flags&unix.O_TRUNC != 0 && flags&unix.O_ACCMODE == unix.O_RDONLY {
		r.counts["open O_RDONLY|O_TRUNC"]++
	}
	return d
}

func (r *fsxRun) randomFlags() int {
	flags := []int{unix.O_RDWR, unix.O_RDWR, unix.O_WRONLY, unix.O_RDONLY}[r.rng.IntN(4)]
	if r.rng.IntN(3) == 0 {
		flags |= unix.O_APPEND
	}
	switch k := r.rng.IntN(48); {
	case k < 4 && flags&unix.O_ACCMODE != unix.O_RDONLY:
		flags |= unix.O_TRUNC
	case k == 4: // Linux truncates, though the descriptor cannot write
		flags |= unix.O_TRUNC
	}
	return flags
}

func (r *fsxRun) closeFd(d *fsxFd) {
	if err := unix.Close(d.fd); err != nil {
		r.fatalf("close %v: %v", d, err)
	}
	r.fds = slices.DeleteFunc(r.fds, func(x *fsxFd) bool { return x == d })
	d.o.fds--
	// A close(2) that sends FLUSH writes the inode's dirty pages back
	// first; the mount sends none for a read-only descriptor
	// (FOPEN_NOFLUSH).
	if d.o.writable() {
		r.written(d.o.f)
	}
	r.note("close %v (%d left on it)", d, d.o.fds)
}

// written notes that the kernel wrote f's dirty pages back.
func (r *fsxRun) written(f *fsxFile) {
	for _, mp := range r.maps {
		if mp.o.f == f {
			mp.dirty = false
		}
	}
}

func (r *fsxRun) opOpen(f *fsxFile) bool {
	if len(r.fds) >= fsxMaxFds {
		return false
	}
	r.open(f, r.randomFlags())
	return true
}

func (r *fsxRun) opClose(f *fsxFile) bool {
	d := r.pickFd(nil, nil)
	if d == nil {
		return false
	}
	r.closeFd(d)
	return true
}

func (r *fsxRun) opDup(f *fsxFile) bool {
	d := r.pickFd(nil, nil)
	if d == nil || len(r.fds) >= fsxMaxFds {
		return false
	}
	fd, err := unix.FcntlInt(uintptr(d.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		r.fatalf("dup %v: %v", d, err)
	}
	nd := &fsxFd{fd: fd, o: d.o}
	d.o.fds++
	r.fds = append(r.fds, nd)
	r.note("dup %v -> fd%d", d, fd)
	return true
}

func (r *fsxRun) opReopen(f *fsxFile) bool {
	d := r.pickFd(f, nil)
	if d == nil {
		return false
	}
	r.closeFd(d)
	r.open(f, r.randomFlags())
	return true
}

// --- writes ---

func (r *fsxRun) opWrite(f *fsxFile) bool {
	d := r.fdFor(f, (*fsxOfd).writable, unix.O_RDWR)
	if d == nil {
		return false
	}
	b := r.bytes(r.length())
	if !d.o.appends() && r.rng.IntN(3) == 0 { // move first, maybe past EOF
		d.o.pos = r.offset(f, len(b))
		if _, err := unix.Seek(d.fd, d.o.pos, 0); err != nil {
			r.fatalf("lseek %v: %v", d, err)
		}
	}
	at := d.o.pos
	if d.o.appends() {
		at = int64(len(f.data))
	}
	if at+int64(len(b)) > fsxMaxLen {
		b = b[:max(0, fsxMaxLen-at)]
	}
	n, err := unix.Write(d.fd, b)
	if err != nil {
		r.fatalf("write %v at %d len %d: %v", d, at, len(b), err)
	}
	r.model(f, at, b[:n])
	if n > 0 { // a write of nothing moves no O_APPEND offset
		d.o.pos = at + int64(n)
	}
	r.note("write %v at %d len %d -> %d", d, at, len(b), n)
	return true
}

func (r *fsxRun) opPwrite(f *fsxFile) bool {
	d := r.fdFor(f, (*fsxOfd).writable, unix.O_WRONLY)
	if d == nil {
		return false
	}
	b := r.bytes(r.length())
	off := r.offset(f, len(b))
	at := off
	if d.o.appends() { // Linux: pwrite on an O_APPEND descriptor appends
		at = int64(len(f.data))
		if at+int64(len(b)) > fsxMaxLen {
			b = b[:max(0, fsxMaxLen-at)]
		}
	}
	n, err := unix.Pwrite(d.fd, b, off)
	if err != nil {
		r.fatalf("pwrite %v off %d len %d: %v", d, off, len(b), err)
	}
	r.model(f, at, b[:n])
	r.note("pwrite %v off %d len %d -> %d at %d", d, off, len(b), n, at)
	return true
}

func (r *fsxRun) opAppend(f *fsxFile) bool {
	flags := []int{unix.O_WRONLY, unix.O_RDWR}[r.rng.IntN(2)] | unix.O_APPEND
	d := r.fdFor(f, func(o *fsxOfd) bool { return o.writable() && o.appends() }, flags)
	if d == nil {
		return false
	}
	at := int64(len(f.data))
	b := r.bytes(min(r.length(), max(0, fsxMaxLen-int(at))))
	if r.rng.IntN(2) == 0 { // the offset does not matter
		d.o.pos = r.rng.Int64N(fsxMaxLen)
		if _, err := unix.Seek(d.fd, d.o.pos, 0); err != nil {
			r.fatalf("lseek %v: %v", d, err)
		}
	}
	n, err := unix.Write(d.fd, b)
	if err != nil {
		r.fatalf("append %v len %d: %v", d, len(b), err)
	}
	r.model(f, at, b[:n])
	if n > 0 {
		d.o.pos = at + int64(n)
	}
	r.note("append %v len %d at %d -> %d", d, len(b), at, n)
	return true
}

func (r *fsxRun) opRead(f *fsxFile) bool {
	d := r.pickFd(f, (*fsxOfd).readable)
	if d == nil {
		return false
	}
	b := make([]byte, r.length())
	n, err := unix.Read(d.fd, b)
	if err != nil {
		r.fatalf("read %v at %d: %v", d, d.o.pos, err)
	}
	want := f.data[min(d.o.pos, int64(len(f.data))):min(d.o.pos+int64(len(b)), int64(len(f.data)))]
	if !bytes.Equal(b[:n], want) {
		r.fatalf("read %v at %d len %d: %s", d, d.o.pos, len(b), describeDiff(b[:n], want))
	}
	r.note("read %v at %d len %d -> %d", d, d.o.pos, len(b), n)
	d.o.pos += int64(n)
	return true
}

func (r *fsxRun) opSeek(f *fsxFile) bool {
	d := r.pickFd(f, nil)
	if d == nil {
		return false
	}
	var off int64
	whence := r.rng.IntN(3)
	switch whence {
	case unix.SEEK_SET:
		off = r.rng.Int64N(fsxMaxLen)
	case unix.SEEK_CUR:
		off = r.rng.Int64N(2*int64(r.page)) - int64(r.page)
		off = max(off, -d.o.pos)
	case unix.SEEK_END:
		off = r.rng.Int64N(2*int64(r.page)) - int64(r.page)
		off = max(off, -int64(len(f.data)))
	}
	got, err := unix.Seek(d.fd, off, whence)
	if err != nil {
		r.fatalf("lseek %v %d whence %d: %v", d, off, whence, err)
	}
	want := []int64{off, d.o.pos + off, int64(len(f.data)) + off}[whence]
	if got != want {
		r.fatalf("lseek %v %d whence %d = %d, want %d", d, off, whence, got, want)
	}
	d.o.pos = got
	r.note("lseek %v %d whence %d -> %d", d, off, whence, got)
	return true
}

func (r *fsxRun) opFtruncate(f *fsxFile) bool {
	d := r.fdFor(f, (*fsxOfd).writable, unix.O_WRONLY)
	if d == nil {
		return false
	}
	size := r.newSize(f)
	if err := unix.Ftruncate(d.fd, size); err != nil {
		r.fatalf("ftruncate %v %d: %v", d, size, err)
	}
	r.note("ftruncate %v %d -> %d", d, len(f.data), size)
	r.resize(f, size)
	return true
}

func (r *fsxRun) opTruncatePath(f *fsxFile) bool {
	size := r.newSize(f)
	if err := unix.Truncate(r.mntPath(f), size); err != nil {
		r.fatalf("truncate %s %d: %v", f.name, size, err)
	}
	r.note("truncate %s %d -> %d", f.name, len(f.data), size)
	r.resize(f, size)
	return true
}

func (r *fsxRun) opFallocate(f *fsxFile) bool {
	d := r.fdFor(f, (*fsxOfd).writable, unix.O_RDWR)
	if d == nil {
		return false
	}
	modes := []struct {
		mode uint32
		name string
	}{
		{0, "allocate"},
		{unix.FALLOC_FL_KEEP_SIZE, "keep-size"},
		{unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, "punch-hole"},
		{unix.FALLOC_FL_ZERO_RANGE, "zero-range"},
		{unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE, "zero-range|keep-size"},
	}
	mode := modes[r.rng.IntN(len(modes))]
	n := r.length()
	off := r.offset(f, n)
	n = min(n, fsxMaxLen-int(off))
	if err := unix.Fallocate(d.fd, mode.mode, off, int64(n)); err != nil {
		r.fatalf("fallocate %v %s off %d len %d: %v", d, mode.name, off, n, err)
	}
	end := off + int64(n)
	size := int64(len(f.data))
	if mode.mode&unix.FALLOC_FL_KEEP_SIZE == 0 && end > size {
		r.resize(f, end)
	}
	if mode.mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) != 0 && off < int64(len(f.data)) {
		clear(f.data[off:min(end, int64(len(f.data)))])
	}
	r.counts["fallocate "+mode.name]++
	r.note("fallocate %v %s off %d len %d (size %d -> %d)", d, mode.name, off, n, size, len(f.data))
	return true
}

func (r *fsxRun) opCopyRange(f *fsxFile) bool {
	dst := r.fdFor(f, func(o *fsxOfd) bool { return o.writable() && !o.appends() }, unix.O_WRONLY)
	if dst == nil {
		return false
	}
	src, same := r.files[0], r.rng.IntN(5) == 0
	if src == f {
		src = r.files[1]
	}
	if same {
		src = f
	}
	n := r.length()
	woff := r.offset(f, n)
	n = min(n, fsxMaxLen-int(woff))
	var roff int64
	if same { // ranges within one file must not overlap
		lo, hi := woff-int64(n), woff+int64(n)
		free := []int64{}
		if lo >= 0 {
			free = append(free, r.rng.Int64N(lo+1))
		}
		if hi < fsxMaxLen {
			free = append(free, hi+r.rng.Int64N(fsxMaxLen-hi))
		}
		if len(free) == 0 {
			return false
		}
		roff = free[r.rng.IntN(len(free))]
	} else {
		roff = r.rng.Int64N(int64(len(src.data)) + int64(r.page))
	}
	want := append([]byte(nil), src.data[min(roff, int64(len(src.data))):min(roff+int64(n), int64(len(src.data)))]...)
	in := r.fdFor(src, (*fsxOfd).readable, unix.O_RDONLY)
	if in == nil {
		return false
	}
	if !slices.Contains(r.fds, dst) { // closed to make room for in
		dst = r.fdFor(f, func(o *fsxOfd) bool { return o.writable() && !o.appends() }, unix.O_WRONLY)
		if dst == nil || !slices.Contains(r.fds, in) {
			return false
		}
	}
	ro, wo := roff, woff
	got, err := unix.CopyFileRange(in.fd, &ro, dst.fd, &wo, n, 0)
	if err != nil {
		r.fatalf("copy_file_range %v off %d -> %v off %d len %d: %v", in, roff, dst, woff, n, err)
	}
	if got > len(want) {
		r.fatalf("copy_file_range %v off %d -> %v off %d len %d copied %d bytes, the source has %d there", in, roff, dst, woff, n, got, len(want))
	}
	r.model(f, woff, want[:got])
	r.note("copy_file_range %v off %d -> %v off %d len %d -> %d", in, roff, dst, woff, n, got)
	return true
}

// --- mappings ---

func (r *fsxRun) opMmap(f *fsxFile) bool {
	if len(r.maps) >= fsxMaxMaps {
		return false
	}
	d := r.fdFor(f, func(o *fsxOfd) bool { return o.flags&unix.O_ACCMODE == unix.O_RDWR }, unix.O_RDWR)
	if d == nil {
		return false
	}
	pages := (len(f.data) + r.page - 1) / r.page
	off := int64(r.rng.IntN(pages+1)) * int64(r.page)
	n := 1 + r.rng.IntN(fsxMaxOp)
	r.ids++
	mp := &fsxMap{id: r.ids, o: d.o, off: off, len: n}
	if _, err := r.mapper.call(mapperMap, mp, off, int64(n), nil, d.fd); err != nil {
		r.fatalf("mmap %v off %d len %d: %v", d, off, n, err)
	}
	r.maps = append(r.maps, mp)
	r.note("mmap %v -> %v", d, mp)
	return true
}

// mapRange is the part of mp inside f: the bytes it may touch.
func (r *fsxRun) mapRange(mp *fsxMap) (lo, hi int) {
	end := min(mp.off+int64(mp.len), int64(len(mp.o.f.data)))
	if end <= mp.off {
		return 0, 0
	}
	return 0, int(end - mp.off)
}

func (r *fsxRun) mmapWrite(mp *fsxMap) bool {
	lo, hi := r.mapRange(mp)
	if lo == hi {
		return false
	}
	a := lo + r.rng.IntN(hi-lo)
	b := a + 1 + r.rng.IntN(min(hi-a, 1+r.length()))
	data := r.bytes(b - a)
	if _, err := r.mapper.call(mapperWrite, mp, int64(a), 0, data, -1); err != nil {
		r.fatalf("mmap-write %v at %d len %d: %v", mp, mp.off+int64(a), len(data), err)
	}
	r.model(mp.o.f, mp.off+int64(a), data)
	// In passthrough mode the mapping is the backing file's: its page
	// cache is the backing file's, never behind it.
	mp.dirty = r.mode.name != "passthrough"
	late := ""
	if mp.o.fds == 0 {
		late = " (its descriptors closed)"
		r.counts[fsxMmapAfterClose]++
	}
	r.note("mmap-write %v at %d len %d%s", mp, mp.off+int64(a), b-a, late)
	return true
}

func (r *fsxRun) pickMap(f *fsxFile) *fsxMap {
	var c []*fsxMap
	for _, mp := range r.maps {
		if f == nil || mp.o.f == f {
			c = append(c, mp)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[r.rng.IntN(len(c))]
}

func (r *fsxRun) opMmapWrite(f *fsxFile) bool {
	mp := r.pickMap(nil)
	return mp != nil && r.mmapWrite(mp)
}

func (r *fsxRun) opMsync(f *fsxFile) bool {
	mp := r.pickMap(nil)
	if mp == nil {
		return false
	}
	if _, err := r.mapper.call(mapperMsync, mp, 0, 0, nil, -1); err != nil {
		r.fatalf("msync %v: %v", mp, err)
	}
	mp.dirty = false
	r.note("msync %v", mp)
	return true
}

func (r *fsxRun) unmap(mp *fsxMap) {
	if _, err := r.mapper.call(mapperUnmap, mp, 0, 0, nil, -1); err != nil {
		r.fatalf("munmap %v: %v", mp, err)
	}
	r.maps = slices.DeleteFunc(r.maps, func(x *fsxMap) bool { return x == mp })
	r.note("munmap %v", mp)
}

func (r *fsxRun) opMunmap(f *fsxFile) bool {
	mp := r.pickMap(nil)
	if mp == nil {
		return false
	}
	r.unmap(mp)
	return true
}

func (r *fsxRun) opFsync(f *fsxFile) bool {
	d := r.pickFd(f, nil)
	if d == nil {
		return false
	}
	name, sync := "fsync", unix.Fsync
	if r.rng.IntN(3) == 0 {
		name, sync = "fdatasync", unix.Fdatasync
	}
	if err := sync(d.fd); err != nil {
		r.fatalf("%s %v: %v", name, d, err)
	}
	r.written(f)
	r.note("%s %v", name, d)
	return true
}

// --- quiescence ---

func (r *fsxRun) opQuiesce(*fsxFile) bool {
	r.quiesce()
	return true
}

// quiesce closes every descriptor, in random order, writes through each
// mapping (its descriptors closed by then) and unmaps it, waits for the
// kernel's releases to be committed and checks each file's version.
func (r *fsxRun) quiesce() {
	r.commitThenChange()
	late := false
	for len(r.fds) > 0 {
		r.closeFd(r.fds[r.rng.IntN(len(r.fds))])
	}
	for len(r.maps) > 0 {
		mp := r.maps[r.rng.IntN(len(r.maps))]
		if r.rng.IntN(4) != 0 && r.mmapWrite(mp) {
			late = true
		}
		if r.rng.IntN(3) == 0 {
			r.checkAll() // the written pages are not written back yet
		}
		r.unmap(mp)
	}
	if late {
		r.counts[fsxQuiesceAfterClose]++
	}
	for _, f := range r.files {
		if f.reader >= 0 {
			unix.Close(f.reader)
			f.reader = -1
		}
	}
	r.waitReleased()
	for _, f := range r.files {
		r.checkVersion(f)
	}
	r.note("quiesce")
}

// fsxLastChanges are the operations commitThenChange makes the last.
var fsxLastChanges = []string{"write", "pwrite", "append", "ftruncate", "truncate", "fallocate", "copy_file_range", "mmap-write"}

// commitThenChange has every descriptor fsync, which commits the files'
// versions, then makes one change through a descriptor
// or mapping already open: the version the releases commit must have it,
// however the daemon learnt of it (a later write's flush, which rehashes
// the whole file, does not hide a change the daemon missed, as it would in
// the middle of a sequence).
func (r *fsxRun) commitThenChange() {
	if len(r.fds) == 0 && len(r.maps) == 0 {
		return // a change would open the file afresh, which owes a version anyway
	}
	for _, d := range r.fds {
		if err := unix.Fsync(d.fd); err != nil {
			r.fatalf("fsync %v: %v", d, err)
		}
		r.written(d.o.f)
	}
	r.note("fsync every descriptor")
	r.existingOnly = true
	defer func() { r.existingOnly = false }()
	for range 20 {
		name := fsxLastChanges[r.rng.IntN(len(fsxLastChanges))]
		i := slices.IndexFunc(fsxOps, func(op fsxOp) bool { return op.name == name })
		if fsxOps[i].run(r, r.files[r.rng.IntN(len(r.files))]) {
			r.counts["last change: "+name]++
			r.checkAll()
			return
		}
	}
}

// waitReleased waits for every file's dirty mark to clear: the kernel
// sends RELEASE after close(2) (and munmap) return, and the last release
// commits the version.
func (r *fsxRun) waitReleased() {
	var marked []string
	if !testfuse.WaitFor(10*time.Second, func() bool {
		marked = marked[:0]
		for _, f := range r.files {
			if r.m.fs.writers.Writing(f.name) {
				marked = append(marked, f.name)
			}
		}
		return len(marked) == 0
	}) {
		r.fatalf("%v still marked as being written 10 s after every descriptor and mapping was closed", marked)
	}
}

// checkVersion checks, at a quiescent point, that the store's current
// version of f is the hash of the model, and that its bytes are kept.
func (r *fsxRun) checkVersion(f *fsxFile) {
	r.checkFile(f)
	want := versionstore.Sum(f.data)
	h, err := r.m.store.History(f.name)
	if err != nil {
		r.fatalf("history %s: %v", f.name, err)
	}
	if len(h) == 0 {
		r.fatalf("%s has no history; want version %s (%d bytes)", f.name, want.Short(), len(f.data))
	}
	for _, e := range h {
		if e.Writer.Kind == versionstore.WriterExternal {
			r.fatalf("history of %s has an external version %s (%d bytes): bytes written through the mount were not seen by it", f.name, e.Version.Short(), e.Size)
		}
	}
	cur := h[0]
	if cur.Version != want || cur.Deleted || cur.Size != int64(len(f.data)) {
		r.fatalf("the store's current version of %s is %s (%d bytes, deleted %v, by %+v), want %s (%d bytes): a write escaped the daemon%s",
			f.name, cur.Version.Short(), cur.Size, cur.Deleted, cur.Writer, want.Short(), len(f.data), r.olderVersions(h))
	}
	kept, err := r.m.store.Object(cur.Version)
	if err != nil || !bytes.Equal(kept, f.data) {
		r.fatalf("the kept bytes of %s@%s: %v, %s", f.name, cur.Version.Short(), err, describeDiff(kept, f.data))
	}
	// The store's read (read_image's) sees the same version, and finds
	// nothing changed behind the mount's back.
	tg, err := r.m.store.Resolve(f.name, f.name, "read")
	if err != nil {
		r.fatalf("resolve %s: %v", f.name, err)
	}
	if _, v, err := r.m.store.ReadBytes(context.Background(), tg, fsxMaxLen+1); err != nil || v != want {
		r.fatalf("a tool read of %s: version %s, %v; want %s", f.name, v.Short(), err, want.Short())
	}
	if h, _ := r.m.store.History(f.name); len(h) == 0 || h[0].Version != want || h[0].Writer.Kind == versionstore.WriterExternal {
		r.fatalf("after a tool read the history of %s is %+v", f.name, h)
	}
}

func (r *fsxRun) olderVersions(h []versionstore.HistoryEntry) string {
	var b strings.Builder
	for i, e := range h[:min(len(h), 5)] {
		fmt.Fprintf(&b, "\n  history[%d]: %s %d bytes by %s pid %d at %s", i, e.Version.Short(), e.Size, e.Writer.Kind, e.Writer.Pid, e.Time.Format("15:04:05.000000"))
	}
	return b.String()
}

// --- checks after every step ---

func (r *fsxRun) checkAll() {
	for _, f := range r.files {
		r.checkFile(f)
	}
	for _, mp := range r.maps {
		lo, hi := r.mapRange(mp)
		if lo == hi {
			continue
		}
		got, err := r.mapper.call(mapperRead, mp, int64(lo), int64(hi), nil, -1)
		if want := mp.o.f.data[mp.off : mp.off+int64(hi)]; err != nil || !bytes.Equal(got, want) {
			r.fatalf("%v shows (%v) %s", mp, err, describeDiff(got, want))
		}
	}
}

// checkFile compares f through the mount, and in the backing directory
// unless a mapping holds pages the kernel has not written back, with the
// model.
func (r *fsxRun) checkFile(f *fsxFile) {
	if f.reader < 0 {
		fd, err := unix.Open(r.mntPath(f), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			r.fatalf("open %s to check it: %v", f.name, err)
		}
		f.reader = fd
	}
	var st unix.Stat_t
	if err := unix.Fstat(f.reader, &st); err != nil || st.Size != int64(len(f.data)) {
		r.fatalf("fstat %s through the mount: size %d, %v; want %d", f.name, st.Size, err, len(f.data))
	}
	if err := unix.Stat(r.mntPath(f), &st); err != nil || st.Size != int64(len(f.data)) {
		r.fatalf("stat %s through the mount: size %d, %v; want %d", f.name, st.Size, err, len(f.data))
	}
	got, err := r.preadAll(f.reader)
	if err != nil || !bytes.Equal(got, f.data) {
		r.fatalf("%s through the mount (%v): %s", f.name, err, describeDiff(got, f.data))
	}
	for _, mp := range r.maps {
		if mp.o.f == f && mp.dirty {
			return
		}
	}
	fd, err := unix.Open(r.backingPath(f), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.fatalf("open %s in the backing directory: %v", f.name, err)
	}
	defer unix.Close(fd)
	if got, err = r.preadAll(fd); err != nil || !bytes.Equal(got, f.data) {
		r.fatalf("%s in the backing directory (%v): %s", f.name, err, describeDiff(got, f.data))
	}
}

// preadAll reads fd from 0 to its end into r's buffer (valid until the
// next call).
func (r *fsxRun) preadAll(fd int) ([]byte, error) {
	if r.buf == nil {
		r.buf = make([]byte, 0, fsxMaxLen+1)
	}
	b := r.buf[:0]
	defer func() { r.buf = b[:0] }()
	for {
		n, err := unix.Pread(fd, b[len(b):cap(b)], int64(len(b)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return b, err
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
		if len(b) == cap(b) {
			b = slices.Grow(b, fsxMaxLen)
		}
	}
}

// describeDiff says where got and want differ.
func describeDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if i == len(got) && i == len(want) {
		return "equal"
	}
	j := i
	for j < len(got) && j < len(want) && got[j] != want[j] {
		j++
	}
	return fmt.Sprintf("%d bytes, want %d; first difference at %d (%d bytes differ from there): got % x, want % x",
		len(got), len(want), i, j-i, window(got, i), window(want, i))
}

func window(b []byte, i int) []byte { return b[min(i, len(b)):min(i+16, len(b))] }

func (r *fsxRun) checkCoverage() {
	if r.ops < 200 {
		return // a short replay need not exercise everything
	}
	kinds := []string{"fallocate allocate", "fallocate keep-size", "fallocate punch-hole", "fallocate zero-range", "fallocate zero-range|keep-size"}
	for _, op := range fsxOps {
		kinds = append(kinds, op.name)
	}
	for _, k := range kinds {
		if r.counts[k] == 0 {
			r.t.Errorf("seed %d never ran %s in %d operations: the test does not exercise it", r.seed, k, r.ops)
		}
	}
	if r.counts[fsxMmapAfterClose] == 0 || r.counts[fsxQuiesceAfterClose] == 0 {
		r.t.Errorf("seed %d never wrote a mapping after closing its descriptors and then checked the version (%v)", r.seed, r.counts)
	}
}

// --- the model and helpers ---

func (r *fsxRun) model(f *fsxFile, at int64, b []byte) {
	if len(b) == 0 {
		return // writes nothing, extends nothing
	}
	if end := at + int64(len(b)); end > int64(len(f.data)) {
		r.resize(f, end)
	}
	copy(f.data[at:], b)
}

func (r *fsxRun) resize(f *fsxFile, size int64) {
	if size <= int64(len(f.data)) {
		f.data = f.data[:size]
		return
	}
	f.data = append(f.data, make([]byte, size-int64(len(f.data)))...)
}

// length is an operation's length: mostly small, sometimes pages long.
func (r *fsxRun) length() int {
	switch k := r.rng.IntN(20); {
	case k < 10:
		return 1 + r.rng.IntN(512)
	case k < 17:
		return 1 + r.rng.IntN(16<<10)
	default:
		return 1 + r.rng.IntN(fsxMaxOp)
	}
}

// offset is where an operation of n bytes starts: anywhere, near the end
// of f, or past it (leaving a hole), on a page boundary now and then.
func (r *fsxRun) offset(f *fsxFile, n int) int64 {
	size := int64(len(f.data))
	var off int64
	switch r.rng.IntN(4) {
	case 0:
		off = r.rng.Int64N(fsxMaxLen)
	case 1:
		off = r.rng.Int64N(size + 1)
	case 2:
		off = max(0, size-r.rng.Int64N(2*int64(r.page)))
	case 3:
		off = size + r.rng.Int64N(4*int64(r.page))
	}
	if r.rng.IntN(5) == 0 {
		off &^= int64(r.page - 1)
	}
	return min(off, fsxMaxLen-int64(n))
}

// newSize is a truncation's size: shrink, grow, or a page boundary.
func (r *fsxRun) newSize(f *fsxFile) int64 {
	size := int64(len(f.data))
	switch r.rng.IntN(4) {
	case 0:
		return r.rng.Int64N(size + 1)
	case 1:
		return min(fsxMaxLen, size+r.rng.Int64N(fsxMaxOp))
	case 2:
		return r.rng.Int64N(fsxMaxLen + 1)
	default:
		return min(fsxMaxLen, (size+r.rng.Int64N(2*int64(r.page)))&^int64(r.page-1))
	}
}

func (r *fsxRun) bytes(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.rng.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func (r *fsxRun) note(format string, args ...any) {
	s := fmt.Sprintf("%5d ", r.step) + fmt.Sprintf(format, args...)
	if len(r.log) == fsxLogLen {
		r.log = r.log[1:]
	}
	r.log = append(r.log, s)
}

func (r *fsxRun) fatalf(format string, args ...any) {
	r.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "fsx %s seed %d, step %d of %d: %s\nlast operations:\n", r.mode.name, r.seed, r.step, r.ops, fmt.Sprintf(format, args...))
	for _, s := range r.log {
		b.WriteString("  " + s + "\n")
	}
	fmt.Fprintf(&b, "replay: DSHFS_FSX_SEED=%d DSHFS_FSX_OPS=%d go test -race -count=1 -run '^TestFsx$/^%s$/' ./fusefs",
		r.seed, r.ops, r.mode.name)
	r.t.Fatal(b.String())
}

// teardown closes what a failed run left open, so the mount can go.
func (r *fsxRun) teardown() {
	if r.mapper != nil {
		// Its mappings go with it, written back to the daemon, still up.
		if err := r.mapper.stop(); err != nil {
			r.t.Error(err)
		}
	}
	for _, d := range r.fds {
		unix.Close(d.fd)
	}
	for _, f := range r.files {
		if f.reader >= 0 {
			unix.Close(f.reader)
		}
	}
	r.maps, r.fds = nil, nil
}

// --- the mapper ---

// The mappings live in a child process, the mapper (this test binary,
// running TestFsxMapper), which receives each mapping's descriptor over a
// socket (SCM_RIGHTS: the same open file description), maps it and closes
// its copy, so the mapping holds the file as a program's would. The test
// process is the daemon: had it mapped the files itself, a page fault or
// munmap waiting on the daemon, which needs this process's mmap_lock or a
// stop of the world to go on, would deadlock it (go-fuse's documentation
// warns about mmap in the serving process; an earlier version of this test
// hung in munmap → fuse_vma_close → write_inode_now).

const fsxMapperEnv = "DSHFS_FSX_MAPPER"

// Mapper requests: op, mapping id, two arguments, then data.
const (
	mapperMap   = 'm' // mmap the descriptor sent along at offset a, length b
	mapperWrite = 'w' // copy data into the mapping at a
	mapperRead  = 'r' // the mapping's bytes [a, b)
	mapperMsync = 's' // msync(MS_SYNC) the whole mapping
	mapperUnmap = 'u'

	mapperHeader = 1 + 4 + 8 + 8
	mapperMsgMax = mapperHeader + fsxMaxOp
)

// TestFsxMapper is not a test: it is the mapper process of TestFsx (this
// binary with DSHFS_FSX_MAPPER set, its socket as descriptor 3). Run
// otherwise, it does nothing.
func TestFsxMapper(t *testing.T) {
	if os.Getenv(fsxMapperEnv) == "" {
		return
	}
	os.Exit(serveMappings(3))
}

// serveMappings answers requests on sock until it is closed. A fault
// (SIGBUS past the end of a file) is answered as an error.
func serveMappings(sock int) int {
	debug.SetPanicOnFault(true)
	maps := map[uint32][]byte{}
	buf := make([]byte, mapperMsgMax)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(sock, buf, oob, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return 0 // the test is done with us
		}
		fd := -1
		if oobn > 0 {
			if cm, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(cm) == 1 {
				if fds, err := unix.ParseUnixRights(&cm[0]); err == nil && len(fds) == 1 {
					fd = fds[0]
				}
			}
		}
		out, err := mapperDo(maps, buf[:n], fd)
		reply := append([]byte{0}, out...)
		if err != nil {
			reply = append([]byte{1}, err.Error()...)
		}
		if err := unix.Sendmsg(sock, reply, nil, nil, 0); err != nil {
			return 1
		}
	}
}

func mapperDo(maps map[uint32][]byte, msg []byte, fd int) (out []byte, err error) {
	defer func() {
		if e := recover(); e != nil {
			err = fmt.Errorf("fault: %v", e)
		}
	}()
	if len(msg) < mapperHeader {
		return nil, fmt.Errorf("short request")
	}
	op, id := msg[0], binary.LittleEndian.Uint32(msg[1:])
	a, b := int64(binary.LittleEndian.Uint64(msg[5:])), int64(binary.LittleEndian.Uint64(msg[13:]))
	data, mem := msg[mapperHeader:], maps[id]
	if op != mapperMap && mem == nil {
		return nil, fmt.Errorf("no mapping %d", id)
	}
	switch op {
	case mapperMap:
		if fd < 0 {
			return nil, fmt.Errorf("no descriptor sent")
		}
		defer unix.Close(fd)
		if mem, err = unix.Mmap(fd, a, int(b), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
			return nil, err
		}
		maps[id] = mem
	case mapperWrite:
		copy(mem[a:a+int64(len(data))], data)
	case mapperRead:
		out = append(out, mem[a:b]...)
	case mapperMsync:
		err = unix.Msync(mem, unix.MS_SYNC)
	case mapperUnmap:
		delete(maps, id)
		err = unix.Munmap(mem)
	default:
		err = fmt.Errorf("unknown request %q", op)
	}
	return out, err
}

// fsxMapper is the test's end of the mapper.
type fsxMapper struct {
	sock int
	cmd  *exec.Cmd
	out  lockedBuffer // its output: a race report, a panic
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startMapper() (*fsxMapper, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	for _, fd := range fds {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4*mapperMsgMax)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4*mapperMsgMax)
	}
	// An answer is due within a minute, or the test fails rather than hangs.
	unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 60})
	child := os.NewFile(uintptr(fds[1]), "mapper socket")
	defer child.Close()
	mp := &fsxMapper{sock: fds[0]}
	mp.cmd = exec.Command(os.Args[0], "-test.run=^TestFsxMapper$", "-test.count=1")
	mp.cmd.Env = append(os.Environ(), fsxMapperEnv+"=1")
	mp.cmd.ExtraFiles = []*os.File{child} // descriptor 3
	mp.cmd.Stdout, mp.cmd.Stderr = &mp.out, &mp.out
	if err := mp.cmd.Start(); err != nil {
		unix.Close(fds[0])
		return nil, fmt.Errorf("start the mapper: %w", err)
	}
	return mp, nil
}

// call sends one request (with fd, if not -1) and returns the answer.
func (mp *fsxMapper) call(op byte, m *fsxMap, a, b int64, data []byte, fd int) ([]byte, error) {
	msg := make([]byte, mapperHeader, mapperHeader+len(data))
	msg[0] = op
	binary.LittleEndian.PutUint32(msg[1:], uint32(m.id))
	binary.LittleEndian.PutUint64(msg[5:], uint64(a))
	binary.LittleEndian.PutUint64(msg[13:], uint64(b))
	msg = append(msg, data...)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if err := unix.Sendmsg(mp.sock, msg, oob, nil, 0); err != nil {
		return nil, fmt.Errorf("send to the mapper: %w (its output: %q)", err, mp.out.String())
	}
	buf := make([]byte, mapperMsgMax)
	for {
		n, _, _, _, err := unix.Recvmsg(mp.sock, buf, nil, 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, fmt.Errorf("the mapper's answer: %w (its output: %q)", err, mp.out.String())
		case n == 0:
			return nil, fmt.Errorf("the mapper is gone (its output: %q)", mp.out.String())
		case buf[0] != 0:
			return nil, errors.New(string(buf[1:n]))
		}
		return buf[1:n], nil
	}
}

// stop ends the mapper: its mappings are unmapped as it exits.
func (mp *fsxMapper) stop() error {
	unix.Close(mp.sock)
	done := make(chan error, 1)
	go func() { done <- mp.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("the mapper: %v (its output: %q)", err, mp.out.String())
		}
		return nil
	case <-time.After(30 * time.Second):
		mp.cmd.Process.Kill()
		<-done
		return fmt.Errorf("the mapper did not exit within 30 s of its socket closing (its output: %q)", mp.out.String())
	}
}
