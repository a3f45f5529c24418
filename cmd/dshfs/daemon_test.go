package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// The daemon reports readiness once. It used to report again when the mount
// failed later (an unmount while files were still open), on the descriptor
// it had closed after "ok" — by then reused for a file the mount had open,
// whose bytes were replaced by the error message.
func TestReadyPipeReportsOnce(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd, err := unix.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	ready := openReadyPipe(fd)
	if !ready.report(nil) {
		t.Fatal("nobody was told")
	}
	if got, _ := io.ReadAll(r); string(got) != "ok\n" {
		t.Fatalf("parent read %q, want ok", got)
	}
	// The number is free again, and now names a file the mount has open.
	path := filepath.Join(t.TempDir(), "important.txt")
	if err := os.WriteFile(path, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Dup2(int(f.Fd()), fd); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if ready.report(errors.New("unmount: detached, but still in use")) {
		t.Fatal("a second report claimed a listener")
	}
	if got, _ := os.ReadFile(path); string(got) != "precious\n" {
		t.Fatalf("the file that reused the descriptor now holds %q", got)
	}
}

// When the daemon could not unmount cleanly on SIGTERM (a process kept the
// mount busy: it was detached instead), `dshfs unmount` says so rather than
// reporting success, from the note the daemon leaves in its state directory.
func TestUnmountReportsTheDaemonsFailure(t *testing.T) {
	mnt, state := t.TempDir(), t.TempDir()
	fakeDaemon := func() mountEntry {
		daemon := exec.Command("sleep", "30") // stands in for the daemon: SIGTERM ends it
		if err := daemon.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { daemon.Wait(); close(exited) }()
		t.Cleanup(func() { daemon.Process.Kill(); <-exited })
		return mountEntry{systemMount: systemMount{MountPoint: mnt}, Record: mountRecord{MountPoint: mnt,
			Socket: filepath.Join(state, "s.sock"), StateDir: state, Pid: daemon.Process.Pid}}
	}
	msg := "unmount " + mnt + ": detached, but still in use"
	if err := os.WriteFile(filepath.Join(state, unmountErrorFile), []byte(msg+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runUnmount(fakeDaemon())
	var exit cli.ExitCoder
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailure || !strings.Contains(err.Error(), "exited, but: "+msg) {
		t.Fatalf("unmount: %v, want exit %d with the daemon's failure", err, exitFailure)
	}
	// A clean exit leaves no note, and unmount succeeds.
	os.Remove(filepath.Join(state, unmountErrorFile))
	if err := runUnmount(fakeDaemon()); err != nil {
		t.Fatalf("clean unmount: %v", err)
	}
}

// Only a FUSE filesystem's root is refused as a mount point: the root of a
// tmpfs (or of another disk) is a fine place to mount dshfs on.
func TestMountPointOnAnotherFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: this test must run")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if err := notMounted(dir); err != nil {
		t.Fatalf("a tmpfs root refused: %v", err)
	}
}
