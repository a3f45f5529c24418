// Each test's comment says what used to go wrong before it.

package unixsocket

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
)

// faultyListener fails its first Accepts with faults, in order.
type faultyListener struct {
	net.Listener
	mu     sync.Mutex
	faults []error
}

func (l *faultyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.faults) > 0 {
		err := l.faults[0]
		l.faults = l.faults[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// syncBuffer is a log destination tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func acceptError(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", errno)}
}

// An accept error other than a timeout stopped the socket for good: the
// accept loop gave up, net/http retried the dead hand-off forever, and
// every later call waited in the backlog until a remount. Now every error
// but a closed listener is retried with backoff, and logged once for the
// episode rather than at every retry.
func TestAcceptSurvivesErrors(t *testing.T) {
	var logs syncBuffer
	faults := []error{acceptError(syscall.EMFILE), acceptError(syscall.ENFILE), acceptError(syscall.ECONNABORTED),
		acceptError(syscall.ENOBUFS), acceptError(syscall.ENOMEM), errors.New("something unforeseen")}
	d := startDaemonWith(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, nil,
		func(l net.Listener) net.Listener { return &faultyListener{Listener: l, faults: faults} })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := d.client.Call(ctx, "read", ToolRequest{Actor: "a", Arguments: []byte(`{"file_path":"none"}`)}); err != nil {
		t.Fatalf("a call after accept errors: %v", err)
	}
	if n := strings.Count(logs.String(), "accept failed"); n != 1 {
		t.Fatalf("%d accept warnings for one episode of six failures, want 1:\n%s", n, logs.String())
	}
}

// fdChildLimit is the descriptor limit of the daemon in
// TestAcceptAfterDescriptorExhaustion.
const fdChildLimit = 64

// fdChild is that test's daemon, run in a process of its own (this test
// binary, from TestMain) with a descriptor limit the test can exhaust. It
// serves dir/ws on dir/s.sock until killed.
func fdChild(dir string) error {
	lim := syscall.Rlimit{Cur: fdChildLimit, Max: fdChildLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	store, err := versionstore.Open(filepath.Join(dir, "ws"), filepath.Join(dir, "index.db"), versionstore.Options{})
	if err != nil {
		return err
	}
	pol, _ := policy.New(store.Observations(), policy.Options{})
	svc, _ := toolapi.New(store, pol, toolapi.Config{})
	srv := NewServer(Config{Tools: svc, Store: store, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	l, err := Listen(filepath.Join(dir, "s.sock"))
	if err != nil {
		return err
	}
	fmt.Println("ready")
	return srv.Serve(l)
}

// The same for real: a client opens connections until the daemon is out
// of descriptors (EMFILE at accept). Once it lets them go, a tool call
// must be answered within a second; it used to wait forever.
func TestAcceptAfterDescriptorExhaustion(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts the daemon's descriptors in /proc")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "ws", "f.txt"), []byte("one\n"), 0o644)
	pid := startFDChild(t, dir)
	sock := filepath.Join(dir, "s.sock")
	var conns []net.Conn
	for range 3 * fdChildLimit {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	waitFor(t, 5*time.Second, "the daemon to run out of descriptors", func() bool {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		return len(fds) >= fdChildLimit
	})
	client := NewClient(sock)
	defer client.CloseIdle()
	call := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := client.Call(ctx, "read", ToolRequest{Actor: "a", Arguments: []byte(`{"file_path":"f.txt"}`)})
		return err
	}
	if err := call(200 * time.Millisecond); err == nil {
		t.Fatal("a call was answered while the daemon had no descriptor left: the test exhausts nothing")
	}
	for _, c := range conns {
		c.Close()
	}
	t0 := time.Now()
	if err := call(time.Second); err != nil {
		t.Fatalf("no answer within a second of the pressure ending: %v", err)
	}
	t.Logf("answered %v after the pressure ended", time.Since(t0).Round(time.Millisecond))
}

// startFDChild runs fdChild in a new process and returns its pid once it
// serves; the process is killed when the test ends.
func startFDChild(t *testing.T, dir string) int {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "DSHFS_FD_CHILD="+dir)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("daemon's log:\n%s", stderr.String())
		}
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child daemon: %q %v\n%s", line, err, stderr.String())
	}
	return cmd.Process.Pid
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !testfuse.WaitFor(timeout, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}
