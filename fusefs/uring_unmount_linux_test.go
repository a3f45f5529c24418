package fusefs

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// TestUnmountKeepsRootFdWhileARingServes unmounts while an io_uring queue
// still serves a request: the backing directory's descriptor stays open,
// where it was closed under the request, whose next openat could then act
// on whatever descriptor took the number.
func TestUnmountKeepsRootFdWhileARingServes(t *testing.T) {
	testfuse.Require(t)
	backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := versionstore.Open(backing, filepath.Join(t.TempDir(), "index.db"), versionstore.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f, err := Mount(mnt, st, Options{NoWatch: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// A queue that never ends, as one whose request is stuck in the kernel.
	stuck := &uringTransport{start: make(chan struct{}), devFd: -1, drain: 10 * time.Millisecond, log: quiet}
	stuck.wg.Add(1)
	f.uring = stuck
	unmountErr := f.Unmount()
	defer stuck.wg.Done()
	_, err = unix.FcntlInt(uintptr(f.rootFd), unix.F_GETFD, 0)
	if !errors.Is(err, syscall.EBADF) {
		defer unix.Close(f.rootFd) // ours still: the test leaks nothing
	}
	if testfuse.Mounted(mnt) {
		t.Fatalf("%s is still mounted", mnt)
	}
	if unmountErr != nil {
		t.Errorf("unmount: %v", unmountErr)
	}
	if errors.Is(err, syscall.EBADF) {
		t.Error("the backing directory's descriptor was closed while a ring request could still use it")
	}
}
