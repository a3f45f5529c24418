package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// When the daemon could not unmount cleanly on SIGTERM (a process kept the
// mount busy: it was detached instead), `dshfs unmount` says so rather than
// reporting success, from the note the daemon leaves in its state directory.
func TestUnmountReportsTheDaemonsFailure(t *testing.T) {
	mnt, state := t.TempDir(), t.TempDir()
	fakeDaemon := func() Entry {
		daemon := exec.Command("sleep", "30") // stands in for the daemon: SIGTERM ends it
		if err := daemon.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { daemon.Wait(); close(exited) }()
		t.Cleanup(func() { daemon.Process.Kill(); <-exited })
		return Entry{MountPoint: mnt, Record: Record{MountPoint: mnt,
			Socket: filepath.Join(state, "s.sock"), StateDir: state, Pid: daemon.Process.Pid}}
	}
	msg := "unmount " + mnt + ": detached, but still in use"
	if err := os.WriteFile(filepath.Join(state, unmountErrorFile), []byte(msg+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	detached, err := Stop(fakeDaemon())
	if err == nil || detached || !strings.Contains(err.Error(), "exited, but: "+msg) {
		t.Fatalf("unmount: %v (detached %v), want the daemon's failure", err, detached)
	}
	// A clean exit leaves no note, and unmount succeeds.
	os.Remove(filepath.Join(state, unmountErrorFile))
	if _, err := Stop(fakeDaemon()); err != nil {
		t.Fatalf("clean unmount: %v", err)
	}
}
