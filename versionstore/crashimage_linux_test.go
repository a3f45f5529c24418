package versionstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The crash-image test: the store's state directory sits on a FUSE
// loopback that records every write, truncate and sync of the index file.
// After a workload, the file as the disk could hold it after a power cut at
// any point is rebuilt — everything up to the last sync, and of the writes
// since none, all, or any of their 512-byte sectors — and the store opened
// on it: it must open within a deadline without panic, on a sound index,
// with every edit and checkpoint acknowledged before the cut in it, and
// every such checkpoint must rewind.

// diskOp is one operation on the index file.
type diskOp struct {
	sync bool
	off  int64  // write offset, or the size of a truncate
	data []byte // nil: a truncate
	end  int64  // where its record ends in the log
}

// The log's records: kind ('w' write, 't' truncate, 's' sync), offset,
// length, data.
const recHeader = 1 + 8 + 4

// diskRecorder reads the log the recording file system writes.
type diskRecorder struct {
	log string
	ops []diskOp
}

// len is the log's size now: a position operations are counted up to.
func (r *diskRecorder) len() int {
	fi, err := os.Stat(r.log)
	if err != nil {
		panic(err)
	}
	return int(fi.Size())
}

// load reads the log's operations.
func (r *diskRecorder) load(t *testing.T) {
	b, err := os.ReadFile(r.log)
	must(t, err)
	le := binary.LittleEndian
	for at := 0; at+recHeader <= len(b); {
		kind, off, n := b[at], int64(le.Uint64(b[at+1:])), int(le.Uint32(b[at+9:]))
		at += recHeader + n
		op := diskOp{sync: kind == 's', off: off, end: int64(at)}
		if kind == 'w' {
			op.data = b[at-n : at]
		}
		r.ops = append(r.ops, op)
	}
}

// opsBefore is how many operations the log held at position pos.
func (r *diskRecorder) opsBefore(pos int) int {
	n, _ := slices.BinarySearchFunc(r.ops, int64(pos), func(op diskOp, p int64) int { return int(op.end - p - 1) })
	return n
}

// lastSync is the position just after the last sync among the first cut
// operations.
func (r *diskRecorder) lastSync(cut int) int {
	for i := cut - 1; i >= 0; i-- {
		if r.ops[i].sync {
			return i + 1
		}
	}
	return 0
}

// image is the file after a cut after the first cut operations: every
// operation before the last sync, and of the writes after it those keep
// chooses (whole, or some sectors).
func (r *diskRecorder) image(cut int, keep func(op diskOp) [][2]int64) []byte {
	var img []byte
	apply := func(op diskOp, from, to int64) {
		switch {
		case op.sync:
		case op.data == nil && op.off <= int64(len(img)):
			img = img[:op.off]
		case op.data == nil:
			img = append(img, make([]byte, op.off-int64(len(img)))...)
		default:
			if end := op.off + to; end > int64(len(img)) {
				img = append(img, make([]byte, end-int64(len(img)))...)
			}
			copy(img[op.off+from:], op.data[from:to])
		}
	}
	synced := r.lastSync(cut)
	for i, op := range r.ops[:cut] {
		if i < synced {
			apply(op, 0, int64(len(op.data)))
			continue
		}
		for _, span := range keep(op) {
			apply(op, span[0], span[1])
		}
	}
	return img
}

// The recording file system runs in a process of its own: a process that
// serves FUSE and also faults on a memory map of a file it serves (bbolt
// reads through one) deadlocks when the runtime stops the world during the
// fault.

// TestMain serves the recording file system when the test binary is run
// as it (see mountRecorder).
func TestMain(m *testing.M) {
	if arg := os.Getenv("DSHFS_TEST_RECORDER"); arg != "" {
		serveRecorder(arg)
		return
	}
	os.Exit(m.Run())
}

// serveRecorder mounts "raw:mnt:log", says "ready", and serves until its
// standard input closes.
func serveRecorder(arg string) {
	parts := strings.SplitN(arg, ":", 3)
	log, err := os.OpenFile(parts[2], os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		panic(err)
	}
	w := &logWriter{f: log}
	loop, err := fs.NewLoopbackRoot(parts[0])
	if err != nil {
		panic(err)
	}
	root := &recNode{LoopbackNode: loop.(*fs.LoopbackNode), log: w}
	server, err := fs.Mount(parts[1], root, &fs.Options{MountOptions: fuse.MountOptions{FsName: "crashrec"}})
	if err != nil {
		panic(err)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	server.Unmount()
}

// logWriter appends records to the log before the operation is answered.
type logWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (w *logWriter) record(kind byte, off int64, data []byte) {
	b := make([]byte, recHeader, recHeader+len(data))
	b[0] = kind
	binary.LittleEndian.PutUint64(b[1:], uint64(off))
	binary.LittleEndian.PutUint32(b[9:], uint32(len(data)))
	if _, err := w.f.Write(append(b, data...)); err != nil {
		panic(err)
	}
}

// recNode is a loopback node that records the index file's operations.
type recNode struct {
	*fs.LoopbackNode
	log *logWriter
}

var _ = (fs.NodeWrapChilder)((*recNode)(nil))

func (n *recNode) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &recNode{LoopbackNode: ops.(*fs.LoopbackNode), log: n.log}
}

type loopFile interface {
	fs.FileReader
	fs.FileWriter
	fs.FileFsyncer
	fs.FileFlusher
	fs.FileReleaser
	fs.FileGetattrer
	fs.FileSetattrer
	fs.FileAllocater
	fs.FileLseeker
}

type recFile struct {
	loopFile
	log *logWriter
}

func (n *recNode) wrap(name string, fh fs.FileHandle) fs.FileHandle {
	if name == "" {
		name = path.Base(n.Path(nil))
	}
	if lf, ok := fh.(loopFile); ok && name == "index.db" {
		return &recFile{lf, n.log}
	}
	return fh
}

func (n *recNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return n.wrap("", fh), fl, errno
}

func (n *recNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, n.wrap(name, fh), fl, errno
}

func (f *recFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.log.mu.Lock()
	defer f.log.mu.Unlock()
	n, errno := f.loopFile.Write(ctx, data, off)
	if errno == 0 {
		f.log.record('w', off, data[:n])
	}
	return n, errno
}

func (f *recFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f.log.mu.Lock()
	defer f.log.mu.Unlock()
	errno := f.loopFile.Fsync(ctx, flags)
	if errno == 0 {
		f.log.record('s', 0, nil)
	}
	return errno
}

func (f *recFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f.log.mu.Lock()
	defer f.log.mu.Unlock()
	errno := f.loopFile.Setattr(ctx, in, out)
	if sz, ok := in.GetSize(); ok && errno == 0 {
		f.log.record('t', int64(sz), nil)
	}
	return errno
}

// mountRecorder mounts a recording loopback of a fresh directory, served by
// a child process, and returns the mount point.
func mountRecorder(t *testing.T) (string, *diskRecorder) {
	t.Helper()
	testfuse.Require(t)
	raw, mnt := t.TempDir(), t.TempDir()
	rec := &diskRecorder{log: filepath.Join(t.TempDir(), "ops")}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DSHFS_TEST_RECORDER="+raw+":"+mnt+":"+rec.log)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("recording file system: %v", err)
		}
		if testfuse.Mounted(mnt) {
			exec.Command("fusermount3", "-u", "-z", mnt).Run()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("recording file system did not start: %q %v", line, err)
	}
	return mnt, rec
}

// ack is a result the store reported: an edit's version or a checkpoint,
// acknowledged when the log held pos operations.
type ack struct {
	pos        int
	key        string
	version    Version
	checkpoint string
}

// crashWorkload runs a seeded mix of tool writes and edits, the mount's
// versions (served as history) and checkpoints, and returns what was
// acknowledged when.
func crashWorkload(t *testing.T, s *Store, rec *diskRecorder, dir string, seed uint64, steps int) []ack {
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	var acks []ack
	for i := range steps {
		key := fmt.Sprintf("f%d.txt", rng.IntN(6))
		if i < 6 { // every file is created by a tool, so a rewind knows its start
			key = fmt.Sprintf("f%d.txt", i)
		}
		content := fmt.Sprintf("step %d seed %d\n", i, seed)
		op := rng.IntN(8)
		if i < 6 {
			op = 7 // a tool write
		}
		switch {
		case op == 0:
			cp, err := s.Checkpoint(ctx, "", nil)
			must(t, err)
			acks = append(acks, ack{pos: rec.len(), checkpoint: cp.Name})
		case op == 3: // concurrent tool writes share commits
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := range 3 {
				wg.Go(func() {
					key := fmt.Sprintf("f%d.txt", (i+w)%6)
					res, err := s.WriteText(ctx, Target{Key: key, Display: key}, fmt.Sprint(content, w), Intent{}, ToolWriter("a"))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acks = append(acks, ack{pos: rec.len(), key: key, version: res.Version})
					mu.Unlock()
				})
			}
			wg.Wait()
		case op <= 2:
			unlock := s.locks.Lock(key)
			must(t, os.WriteFile(filepath.Join(dir, key), []byte(content), 0o644))
			_, err := s.Refresh(key, Writer{Kind: WriterMount, Pid: 1})
			unlock()
			must(t, err)
			if _, err := s.History(key); err != nil { // served: durable now
				t.Fatal(err)
			}
			acks = append(acks, ack{pos: rec.len(), key: key, version: SumString(content)})
		default:
			res, err := s.WriteText(ctx, Target{Key: key, Display: key}, content, Intent{}, ToolWriter("a"))
			must(t, err)
			acks = append(acks, ack{pos: rec.len(), key: key, version: res.Version})
		}
	}
	slices.SortStableFunc(acks, func(a, b ack) int { return a.pos - b.pos })
	return acks
}

// checkImage opens a store on img and checks what acks promise.
func checkImage(t *testing.T, dir string, img []byte, acks []ack, cut int) {
	t.Helper()
	state := t.TempDir()
	index := filepath.Join(state, "index.db")
	must(t, os.WriteFile(index, img, 0o600))
	var s *Store
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		var err error
		if s, err = Open(dir, index, Options{}); err != nil {
			panic(err)
		}
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Fatalf("cut at %d: open: %v", cut, p)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("cut at %d: open did not return within 30 s", cut)
	}
	defer s.Close()
	if aside, _ := filepath.Glob(index + ".damaged-*"); len(aside) > 0 {
		t.Fatalf("cut at %d: the index was damaged", cut)
	}
	for _, a := range acks {
		if a.pos > cut {
			break
		}
		if a.checkpoint != "" {
			res, err := s.Rewind(context.Background(), a.checkpoint, RewindOptions{DryRun: true})
			if err != nil {
				t.Fatalf("cut at %d: acknowledged checkpoint %s (at %d): %v", cut, a.checkpoint, a.pos, err)
			}
			if res.Conflicts != 0 {
				t.Fatalf("cut at %d: checkpoint %s does not rewind: %+v", cut, a.checkpoint, res)
			}
			continue
		}
		h, err := s.History(a.key)
		must(t, err)
		if !slices.ContainsFunc(h, func(e HistoryEntry) bool { return e.Version == a.version }) {
			t.Fatalf("cut at %d: acknowledged version %s of %s (at %d) missing from history", cut, a.version.Short(), a.key, a.pos)
		}
	}
}

// crashSeeds is how many workloads the test replays (DSHFS_CRASH_SEEDS
// for a longer run).
func crashSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("DSHFS_CRASH_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 2
}

func TestCrashImages(t *testing.T) {
	for seed := range uint64(crashSeeds()) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			mnt, rec := mountRecorder(t)
			dir := t.TempDir()
			s, err := Open(dir, filepath.Join(mnt, "index.db"), Options{})
			must(t, err)
			t.Cleanup(func() { s.Close() }) // before the unmount
			acks := crashWorkload(t, s, rec, dir, seed, 40)
			must(t, s.Close())
			rec.load(t)
			for i := range acks {
				acks[i].pos = rec.opsBefore(acks[i].pos)
			}
			rng := rand.New(rand.NewPCG(seed, 2))
			n := len(rec.ops)
			cuts := []int{n}
			for range 12 {
				cuts = append(cuts, acks[rng.IntN(len(acks))].pos, rng.IntN(n+1))
			}
			for _, cut := range cuts {
				// Nothing since the last sync reached the disk.
				checkImage(t, dir, rec.image(cut, func(diskOp) [][2]int64 { return nil }), acks, cut)
				// Some of it did, in pieces.
				checkImage(t, dir, rec.image(cut, func(op diskOp) [][2]int64 { return tornSpans(rng, op) }), acks, cut)
			}
		})
	}
}

// tornSpans picks which 512-byte sectors of an unsynced write reached the
// disk: none, all, or a random subset.
func tornSpans(rng *rand.Rand, op diskOp) [][2]int64 {
	n := int64(len(op.data))
	switch rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return [][2]int64{{0, n}}
	}
	var spans [][2]int64
	for from := int64(0); from < n; from += 512 {
		if rng.IntN(2) == 0 {
			spans = append(spans, [2]int64{from, min(from+512, n)})
		}
	}
	return spans
}
