package fusefs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// viewExitEnv names the directory the child process of
// TestBranchViewExitWithAFileOpen works in.
const viewExitEnv = "DSHFS_TEST_VIEW_EXIT"

// A process that serves a branch view and exits holding one of the view's
// files open exits. The daemon can: a release the kernel had queued for the
// branch's mount when it was unmounted is never sent, so that mount keeps
// its descriptor of the view's file, and the view is detached busy. Were
// the close at exit to wait for the view's answer to a FLUSH, it would
// wait for ever: the view's server is gone with the process.
func TestBranchViewExitWithAFileOpen(t *testing.T) {
	if dir := os.Getenv(viewExitEnv); dir != "" {
		serveViewAndExit(t, dir)
		return
	}
	testfuse.Require(t)
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^TestBranchViewExitWithAFileOpen$", "-test.count=1")
	cmd.Env = append(os.Environ(), viewExitEnv+"="+t.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the child: %v\n%s", err, out.Bytes())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("a process holding a view's file open did not exit within 60 s of its exit\n%s", out.Bytes())
	}
}

// serveViewAndExit mounts a branch view in dir, opens a file of it for
// writing, detaches the view (busy) and exits with the file open.
func serveViewAndExit(t *testing.T, dir string) {
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{"ws", "upper", "frozen", "view"} {
		must(t, os.Mkdir(filepath.Join(dir, d), 0o700))
	}
	must(t, os.WriteFile(filepath.Join(ws, "f"), []byte("f\n"), 0o644))
	st, err := versionstore.Open(ws, filepath.Join(dir, "index.db"), versionstore.Options{})
	must(t, err)
	_, err = st.MarkCheckpoint("branch:x")
	must(t, err)
	snap, err := st.Snapshot("branch:x")
	must(t, err)
	view := filepath.Join(dir, "view")
	_, err = MountBranchView(view, st, snap, BranchViewOptions{
		Upper: filepath.Join(dir, "upper"), Frozen: filepath.Join(dir, "frozen"), Index: filepath.Join(dir, "index.json")})
	must(t, err)
	fd, err := unix.Open(filepath.Join(view, "f"), unix.O_RDWR, 0) // no O_CLOEXEC: not for a child, and never closed
	must(t, err)
	_, err = unix.Write(fd, []byte("written\n"))
	must(t, err)
	must(t, detach(view))
	os.Exit(0)
}
