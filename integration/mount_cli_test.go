package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// `dshfs mount --foreground` serves the mount, keeps its index outside the
// workspace (and out of the mount), and on SIGTERM commits and unmounts.
func TestMountCommandLifecycle(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), t.TempDir()
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dshfsBin, "mount", backing, mnt, "--foreground")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		unix.Unmount(mnt, mntDetach)
	})
	waitMounted(t, mnt, true)

	if err := os.WriteFile(filepath.Join(mnt, "f.txt"), []byte("through the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(mnt)
	if len(entries) != 1 {
		t.Fatalf("mount lists %v: the state directory must not appear", entries)
	}

	// The tools over the socket, found from the mount point: a read, a shell
	// change behind it, the stale refusal, and a re-read that unblocks.
	call := func(want int, args ...string) string {
		t.Helper()
		out, code := dshfs(t, state, append([]string{"call", "--mount", mnt, "--actor", "agent"}, args...)...)
		if code != want {
			t.Fatalf("dshfs call %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return out
	}
	if out := call(0, "read", `{"file_path":"f.txt"}`); !strings.Contains(out, "1: through the mount") {
		t.Fatalf("read: %q", out)
	}
	if err := os.WriteFile(filepath.Join(mnt, "f.txt"), []byte("changed by a shell\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := call(1, "edit", `{"file_path":"f.txt","old_string":"changed","new_string":"edited"}`); out != `Error: cannot edit "`+filepath.Join(mnt, "f.txt")+`": file changed since it was read — re-read the file, then retry`+"\n" {
		t.Fatalf("stale edit: %q", out)
	}
	call(0, "read", `{"file_path":"f.txt"}`)
	call(0, "edit", `{"file_path":"f.txt","old_string":"changed","new_string":"edited"}`)
	if b, _ := os.ReadFile(filepath.Join(mnt, "f.txt")); string(b) != "edited by a shell\n" {
		t.Fatalf("through the mount after the tool edit: %q", b)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("dshfs mount exited with %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		// SIGQUIT makes it print every goroutine's stack: where it hangs.
		// The output is read once it exited (exec copies into it till then).
		cmd.Process.Signal(syscall.SIGQUIT)
		<-exited
		t.Fatalf("dshfs mount did not exit 20 s after SIGTERM\n%s", stderr.String())
	}
	waitMounted(t, mnt, false)

	// The index was committed and closed cleanly: reopen it and look.
	index, _ := filepath.Glob(filepath.Join(state, "dshfs", "*", "index.db"))
	if len(index) != 1 {
		t.Fatalf("index files: %v", index)
	}
	store, err := versionstore.Open(backing, index[0], versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h, err := store.History("f.txt")
	if err != nil || len(h) != 3 || h[0].Version != versionstore.SumString("edited by a shell\n") || h[0].Writer.Actor != "agent" ||
		h[1].Writer.Kind != versionstore.WriterMount || h[2].Version != versionstore.SumString("through the mount\n") {
		t.Fatalf("history after shutdown: %+v %v", h, err)
	}
}

func waitMounted(t *testing.T, mnt string, want bool) {
	t.Helper()
	if !testfuse.WaitFor(10*time.Second, func() bool { return testfuse.Mounted(mnt) == want }) {
		t.Fatalf("%s mounted != %v after 10 s", mnt, want)
	}
}

// A mount point inside the backing directory would deadlock; it is refused
// with a plain explanation.
func TestMountPointInsideBackingRefused(t *testing.T) {
	testfuse.Require(t)
	backing := t.TempDir()
	store, err := versionstore.Open(backing, filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	inner := filepath.Join(backing, "mnt")
	os.Mkdir(inner, 0o755)
	_, err = fusefs.Mount(inner, store, fusefs.Options{})
	if err == nil || !strings.Contains(err.Error(), "inside the backing directory") {
		t.Fatalf("err = %v", err)
	}
}

// dshfs mount --baseline indexes the whole workspace in the background and
// keeps every file's bytes: a file nobody touched, changed straight in the
// backing directory later, can be restored.
func TestMountBaseline(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(backing, "deep", "er"), 0o755))
	must(t, os.WriteFile(filepath.Join(backing, "deep", "er", "untouched.txt"), []byte("as it was\n"), 0o644))
	if out, code := dshfs(t, state, "mount", "--baseline", backing, mnt); code != 0 {
		t.Fatalf("mount: %s", out)
	}
	t.Cleanup(func() {
		dshfs(t, state, "unmount", mnt)
		unix.Unmount(mnt, mntDetach)
	})
	file := filepath.Join(mnt, "deep", "er", "untouched.txt")
	out := ""
	if !testfuse.WaitFor(10*time.Second, func() bool { // the background walk
		var h []versionstore.HistoryEntry
		var code int
		out, code = dshfs(t, state, "log", "--json", file)
		return code == 0 && json.Unmarshal([]byte(out), &h) == nil && len(h) == 1 && h[0].Kept
	}) {
		t.Fatalf("the baseline did not index %s: %s", file, out)
	}
	must(t, os.WriteFile(filepath.Join(backing, "deep", "er", "untouched.txt"), []byte("changed behind its back\n"), 0o644))
	if out, code := dshfs(t, state, "restore", file, versionstore.SumString("as it was\n").String()); code != 0 {
		t.Fatalf("restore: %s", out)
	}
	if b, _ := os.ReadFile(file); string(b) != "as it was\n" {
		t.Fatalf("restored %q", b)
	}
}
