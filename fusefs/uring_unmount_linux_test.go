package fusefs

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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

// TestSwitchOnURingSaysItIsTheMachines switches on a stand-in for the
// module parameter: the warning says the switch is the whole machine's,
// outlives the daemon, and how to switch it back.
func TestSwitchOnURingSaysItIsTheMachines(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching io_uring on needs root")
	}
	param := filepath.Join(t.TempDir(), "enable_uring")
	if err := os.WriteFile(param, []byte("N\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	if why := switchOnURing(param, slog.New(slog.NewTextHandler(&logged, nil))); why != "" {
		t.Fatalf("not switched on: %s", why)
	}
	if b, _ := os.ReadFile(param); string(b) != "1" {
		t.Errorf("parameter now %q, want 1", b)
	}
	for _, want := range []string{"level=WARN", "whole machine", "every FUSE server", "stays on", `switch_back="echo 0 > ` + param} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("log %q lacks %q", logged.String(), want)
		}
	}
}
