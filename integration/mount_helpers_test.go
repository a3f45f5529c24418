package integration

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
)

// workspace is the whole engine over a real mount: the store, the policy,
// the tools and the FUSE view, as the daemon wires them.
type workspace struct {
	t       *testing.T
	backing string
	mnt     string
	store   *versionstore.Store
	fs      *fusefs.FS
	svc     *toolapi.Service
}

// mountWorkspace mounts a fresh workspace under t.TempDir() and unmounts it
// at cleanup, even when the test fails.
func mountWorkspace(t *testing.T) *workspace {
	t.Helper()
	testfuse.Require(t)
	opts := fusefs.Options{NoPassthrough: os.Getenv("DSHFS_TEST_PASSTHROUGH") == "off"}
	transportOptions(t, &opts)
	w := &workspace{t: t, backing: t.TempDir(), mnt: filepath.Join(t.TempDir(), "mnt")}
	if err := os.Mkdir(w.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	w.store, err = versionstore.Open(w.backing, filepath.Join(t.TempDir(), "index.db"), versionstore.Options{
		AliasRoots: []string{w.mnt},
		OnPublish:  func(key string) { w.fs.Invalidate(key) },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(w.store.Observations(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if w.svc, err = toolapi.New(w.store, pol, toolapi.Config{MountPoint: w.mnt}); err != nil {
		t.Fatal(err)
	}
	if w.fs, err = fusefs.Mount(w.mnt, w.store, opts); err != nil {
		w.store.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.fs.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		if err := w.store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
		if testfuse.Mounted(w.mnt) {
			t.Errorf("%s is still mounted", w.mnt)
		}
	})
	checkTransport(t, w.fs, opts)
	return w
}

func (w *workspace) path(rel string) string { return filepath.Join(w.mnt, rel) }

// inDir is a command that runs name in dir. The process serving a mount
// must never chdir into it between fork and exec (as exec.Cmd.Dir does): the
// forking thread holds its P in a raw system call until the child execs, a
// garbage collection then waits for it, and the child's chdir waits for the
// daemon — a deadlock. The new program changes directory itself instead.
func inDir(dir, name string, args ...string) *exec.Cmd {
	return exec.Command("sh", append([]string{"-c", `cd "$0" && exec "$@"`, dir, name}, args...)...)
}

// sh runs a shell script with the mount as its working directory.
func (w *workspace) sh(script string) string {
	w.t.Helper()
	cmd := inDir(w.mnt, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "HOME="+w.t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		w.t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	return string(out)
}

func (w *workspace) call(actor, tool string, args any) toolapi.Result {
	w.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		w.t.Fatal(err)
	}
	r, err := w.svc.Call(context.Background(), tool, toolapi.Request{Actor: actor, Arguments: raw})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *workspace) read(actor, rel string) toolapi.Result {
	w.t.Helper()
	r := w.call(actor, toolapi.ToolRead, map[string]any{"file_path": w.path(rel)})
	if r.IsError {
		w.t.Fatalf("read %s: %s", rel, r.Text)
	}
	return r
}

func (w *workspace) edit(actor, rel, old, new string) toolapi.Result {
	w.t.Helper()
	return w.call(actor, toolapi.ToolEdit, map[string]any{"file_path": w.path(rel), "old_string": old, "new_string": new})
}

func (w *workspace) write(actor, rel, content string) toolapi.Result {
	w.t.Helper()
	return w.call(actor, toolapi.ToolWrite, map[string]any{"file_path": w.path(rel), "content": content})
}

// content reads a file through the mount.
func (w *workspace) content(rel string) string {
	w.t.Helper()
	b, err := os.ReadFile(w.path(rel))
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

// indexVersion is the newest version the index holds for rel, once the
// files written through the mount are released.
func (w *workspace) indexVersion(rel string) versionstore.Version {
	w.t.Helper()
	h, err := w.history(rel)
	if err != nil || len(h) == 0 {
		w.t.Fatalf("history of %s: %v %v", rel, h, err)
	}
	return h[0].Version
}

// history is rel's history in the index, once the files written through
// the mount are released.
func (w *workspace) history(rel string) ([]versionstore.HistoryEntry, error) {
	w.released()
	return w.store.History(rel)
}

// released waits, up to 2 s, until no file is being written through the
// mount: with kernel passthrough a shell's write is committed at its
// release, which the kernel sends after close(2) has returned.
func (w *workspace) released() {
	testfuse.WaitFor(2*time.Second, func() bool {
		st, err := w.store.Stats()
		return err == nil && st.Writing == 0
	})
}

// indexVersionBecomes waits, up to 2 s, for the index to hold want for rel
// and returns what it holds: a file renamed while its writer still held it
// is committed by the writer's release, which the kernel sends after
// close(2) has returned.
func (w *workspace) indexVersionBecomes(rel string, want versionstore.Version) versionstore.Version {
	w.t.Helper()
	var v versionstore.Version
	testfuse.WaitFor(2*time.Second, func() bool { v = w.indexVersion(rel); return v == want })
	return v
}

func wantCode(t *testing.T, r toolapi.Result, code versionstore.Code) {
	t.Helper()
	got := ""
	if r.Error != nil {
		got = r.Error.Code
	}
	if got != string(code) {
		t.Fatalf("result %q: code %q, want %q", r.Text, got, code)
	}
}
