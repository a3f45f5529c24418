package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// `dshfs mount` returns once the daemon serves; `status` lists it; a daemon
// killed with SIGKILL leaves a dead mount that the next `dshfs mount`
// recovers, with the actor's observations kept and a file changed while the
// daemon was down detected as changed; `unmount` ends it.
func TestDaemonRestartRecovery(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), t.TempDir()
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dshfs(t, state, "unmount", mnt)
		unix.Unmount(mnt, mntDetach)
	})
	run := func(want int, args ...string) string {
		t.Helper()
		out, code := dshfs(t, state, args...)
		if code != want {
			t.Fatalf("dshfs %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return out
	}
	out := run(0, "mount", backing, mnt)
	pid := daemonPid(t, out)
	if err := os.WriteFile(filepath.Join(mnt, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "b.txt"), []byte("beta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(0, "call", "--mount", mnt, "--actor", "agent", "read", `{"file_path":"a.txt"}`)
	run(0, "call", "--mount", mnt, "--actor", "agent", "read", `{"file_path":"b.txt"}`)
	if st := run(0, "status"); !strings.Contains(st, mnt) {
		t.Fatalf("status does not list the mount:\n%s", st)
	}

	// Crash: the mount is left dead.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testfuse.WaitFor(10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	if _, err := os.Stat(filepath.Join(mnt, "a.txt")); err == nil {
		t.Fatal("the mount still answers after its daemon was killed")
	}
	// While it is down, someone changes b.txt in the backing directory.
	if err := os.WriteFile(filepath.Join(backing, "b.txt"), []byte("beta, changed while down\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	run(0, "mount", backing, mnt)
	// The observation of a.txt survived: an edit works without a re-read.
	run(0, "call", "--mount", mnt, "--actor", "agent", "edit", `{"file_path":"a.txt","old_string":"alpha","new_string":"ALPHA"}`)
	// b.txt changed behind dshfs's back: the old observation is stale.
	out, code := dshfs(t, state, "call", "--mount", mnt, "--actor", "agent", "edit", `{"file_path":"b.txt","old_string":"beta","new_string":"BETA"}`)
	if code != 1 || !strings.Contains(out, "file changed since it was read") {
		t.Fatalf("edit of a file changed while down: exit %d %q", code, out)
	}
	if log := run(0, "log", filepath.Join(mnt, "b.txt")); !strings.Contains(log, "external") {
		t.Fatalf("the change made while down is not in the log as external:\n%s", log)
	}
	run(0, "unmount", mnt)
	if testfuse.Mounted(mnt) {
		t.Fatal("still mounted after unmount")
	}
}

func daemonPid(t *testing.T, out string) int {
	t.Helper()
	i := strings.Index(out, "(pid ")
	if i < 0 {
		t.Fatalf("no pid in %q", out)
	}
	rest := out[i+5:]
	pid, err := strconv.Atoi(rest[:strings.IndexAny(rest, ",)")])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
