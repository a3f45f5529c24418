// Each test's comment says what used to go wrong before it.

package unixsocket

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// pacedFile is a 1 GiB text file of 64-byte lines whose every read waits
// for the test's go-ahead: the test sees each read the store makes, and
// decides when it goes on. Once stop is closed, reads fail.
type pacedFile struct {
	fs.Inode
	waiting chan struct{} // a read asks to go on
	token   chan struct{} // and may
	stop    chan struct{}
}

const pacedSize = 1 << 30

var (
	_ = (fs.NodeGetattrer)((*pacedFile)(nil))
	_ = (fs.NodeOpener)((*pacedFile)(nil))
	_ = (fs.NodeReader)((*pacedFile)(nil))
)

func (f *pacedFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode, out.Size = syscall.S_IFREG|0o644, pacedSize
	return 0
}

func (f *pacedFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0 // every read comes here
}

func (f *pacedFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	select {
	case f.waiting <- struct{}{}:
	case <-f.stop:
		return nil, syscall.EIO
	}
	select {
	case <-f.token:
	case <-f.stop:
		return nil, syscall.EIO
	}
	n := min(int64(len(dest)), pacedSize-off)
	for i := range n {
		dest[i] = 'x'
		if (off+i)%64 == 63 {
			dest[i] = '\n'
		}
	}
	return fuse.ReadResultData(dest[:n]), 0
}

type pacedRoot struct {
	fs.Inode
	file *pacedFile
}

func (r *pacedRoot) OnAdd(ctx context.Context) {
	r.AddChild("big.txt", r.NewPersistentInode(ctx, r.file, fs.StableAttr{Mode: syscall.S_IFREG}), false)
}

// Tool calls answered by the socket's own loop ran on context.Background():
// a client that hung up (a harness cancelling a call, or killed) left its
// call running to the end — here, a read of a 1 GiB file, every byte of it
// hashed — and so did the daemon stopping. Now the call runs on its
// request's context, which ends when the client goes or the server stops
// serving: the read stops at its next chunk and records nothing.
func TestCallCancelledWhenClientHangsUp(t *testing.T) {
	testfuse.Require(t)
	t.Run("client hangs up", func(t *testing.T) {
		callAbandoned(t, func(hangUp func(), _ net.Listener) { hangUp() })
	})
	t.Run("daemon stops serving", func(t *testing.T) {
		callAbandoned(t, func(_ func(), l net.Listener) { l.Close() })
	})
}

// callAbandoned starts a read of a large file through the socket, calls
// leave once the read has started, and checks that the read stops.
func callAbandoned(t *testing.T, leave func(hangUp func(), l net.Listener)) {
	var l net.Listener
	d := startDaemonWith(t, Config{}, nil, func(sl net.Listener) net.Listener { l = sl; return sl })
	f := &pacedFile{waiting: make(chan struct{}), token: make(chan struct{}), stop: make(chan struct{})}
	mnt := filepath.Join(d.ws, "paced")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := fs.Mount(mnt, &pacedRoot{file: f}, &fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(f.stop) // whatever still reads fails
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})

	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	returned := make(chan error, 1)
	go func() {
		_, err := d.client.Call(ctx, "read", ToolRequest{Actor: "gone", Arguments: json.RawMessage(`{"file_path":"paced/big.txt"}`)})
		returned <- err
	}()
	select {
	case <-f.waiting: // the call is reading the file
	case err := <-returned:
		t.Fatalf("the call returned before it read the file: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the call never read the file")
	}
	leave(hangUp, l)

	// Let the read go on a chunk at a time until the call ends. 2,048
	// reads (at most 256 MiB) are far more than the daemon needs to see
	// the hang-up, and far fewer than the file's.
	ended := make(chan struct{})
	go func() {
		testfuse.WaitFor(2*time.Minute, func() bool { return callEnded(d.srv) })
		close(ended)
	}()
	const budget = 2048
	reads := 0
	for waiting := true; waiting; {
		if reads == budget {
			t.Fatalf("the call went on for %d reads of the file after it was abandoned", reads)
		}
		f.token <- struct{}{} // the read that waits goes on
		reads++
		select {
		case <-f.waiting:
		case <-ended:
			waiting = false
		}
	}
	if !callEnded(d.srv) {
		t.Fatal("the call did not end")
	}
	t.Logf("the call ended %d reads after it was abandoned", reads)
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the client's call did not return")
	}
	if acts, err := d.pol.Activity(); err != nil || len(acts) != 0 {
		t.Fatalf("the abandoned read recorded an observation: %+v %v", acts, err)
	}
}

// callEnded reports whether a read call has returned in srv.
func callEnded(srv *Server) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	c := srv.ops["read"]
	return c != nil && c.Load() > 0
}
