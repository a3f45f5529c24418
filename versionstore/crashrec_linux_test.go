package versionstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The recorder of TestCrashImages: a FUSE loopback, served by a child
// process, that logs every write, truncate and sync of the index file, and
// rebuilds the file as a power cut could leave it.

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
