package integration

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"golang.org/x/sys/unix"
)

// A daemon killed (SIGKILL) in the middle of an extraction through its
// mount, with requests on its rings, leaves no process stuck: the
// extraction fails (the connection is gone) and ends. Over io_uring where
// the kernel lets, over /dev/fuse (said in the log) elsewhere.
func TestDaemonKilledDuringExtraction(t *testing.T) {
	testfuse.Require(t)
	keepURingParam(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), t.TempDir()
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command(dshfsBin, "mount", backing, mnt, "--foreground", "--io-uring")
	daemon.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		daemon.Process.Kill()
		unix.Unmount(mnt, mntDetach)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
		}
	})
	go func() { daemon.Wait(); close(exited) }()
	waitMounted(t, mnt, true)
	t.Logf("requests over %s", transportOf(t, state, mnt))

	extract := exec.Command("tar", "-x", "-f", "-", "-C", mnt)
	in, err := extract.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	extract.Stderr = &stderr
	if err := extract.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { writeTar(in, 50_000); in.Close() }() // far more than extract before the kill
	if !testfuse.WaitFor(30*time.Second, func() bool { return countFiles(backing) >= 100 }) {
		t.Fatalf("tar extracted %d files in 30 s", countFiles(backing))
	}
	if err := daemon.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- extract.Wait() }()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatalf("tar succeeded after the daemon was killed; extracted %d files", countFiles(backing))
		}
		t.Logf("tar: %v; %s", err, firstLine(stderr.String()))
	case <-time.After(60 * time.Second):
		extract.Process.Kill()
		t.Fatalf("tar still running 60 s after the daemon was killed (stuck on the dead mount)")
	}
	// The killed daemon itself is gone once its dead mount is: its rings'
	// requests end with the connection, which the unmount aborts.
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Logf("the killed daemon still exiting 10 s after tar ended; detaching its mount")
	}
	if err := unix.Unmount(mnt, mntDetach); err != nil && !errors.Is(err, unix.EINVAL) {
		t.Errorf("detach the dead mount: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Errorf("the killed daemon still exiting 60 s after its mount was detached")
	}
}

// transportOf is what dshfs status says carries mnt's requests, waiting up
// to 30 s for the daemon to answer.
func transportOf(t testing.TB, state, mnt string) string {
	got, out := "", ""
	testfuse.WaitFor(30*time.Second, func() bool {
		got, out = statusTransport(t, state, mnt)
		return got != ""
	})
	if got == "" {
		t.Fatalf("dshfs status --json gives no transport for %s:\n%s", mnt, out)
	}
	return got
}

func statusTransport(t testing.TB, state, mnt string) (string, string) {
	out, code := dshfs(t, state, "status", "--json", mnt)
	var entries []struct {
		MountPoint    string `json:"mount_point"`
		Transport     string `json:"transport"`
		TransportNote string `json:"transport_note"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &entries) != nil {
		return "", out
	}
	for _, e := range entries {
		if e.MountPoint == mnt && e.Transport != "" {
			return strings.TrimSpace(e.Transport + " " + e.TransportNote), out
		}
	}
	return "", out
}

// writeTar writes an archive of n small files in 100 directories to w,
// stopping at the first error (the reader gone).
func writeTar(w io.Writer, n int) error {
	tw := tar.NewWriter(w)
	body := bytes.Repeat([]byte("x"), 2048)
	for i := range n {
		h := &tar.Header{Name: fmt.Sprintf("d%02d/f%05d", i%100, i), Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	return tw.Close()
}

func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
