package toolapi

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// update rewrites the golden files of the tests that compare against them.
var update = flag.Bool("update", false, "rewrite testdata goldens")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs (go test -update rewrites it):\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// mountRename renames a file as the mount does: under both locks, both
// paths kept first, the rename noted for the journal, both recorded.
func (h *harness) mountRename(from, to string) {
	h.t.Helper()
	m := h.store.AttachMount(nil)
	unlock := m.Locks().Lock2(from, to)
	defer unlock()
	m.Preserve(from)
	absent := m.Preserve(to)
	if err := os.Rename(h.backing(from), h.backing(to)); err != nil {
		h.t.Fatal(err)
	}
	m.NoteRename(from, to)
	if absent {
		m.Created(to)
	}
	for _, k := range []string{from, to} {
		if _, err := m.Refresh(k, versionstore.Writer{Kind: versionstore.WriterMount, Pid: 7, Comm: "mv"}); err != nil {
			h.t.Fatal(err)
		}
	}
}

// One review of a session: every kind of change since a checkpoint, as one
// unified diff.
func TestSessionDiff(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.put("edited.txt", "one\ntwo\nthree\n")
	h.put("read-only.txt", "the agent only read this\n")
	h.put("untouched.txt", "nobody touched this\n")
	h.put("doomed.txt", "to be removed\n")
	h.put("old-name.txt", "moved along\n")
	h.put("pic.bin", "\x00\x01binary")
	if _, err := h.store.Checkpoint(ctx, "start", nil); err != nil {
		t.Fatal(err)
	}
	mustOK(t, h.read(agent, "edited.txt"))
	mustOK(t, h.edit(agent, "edited.txt", "two", "TWO"))
	mustOK(t, h.read(agent, "read-only.txt"))
	h.put("read-only.txt", "changed behind dshfs's back\n")
	h.put("untouched.txt", "changed although nobody had touched it\n")
	if err := os.Remove(h.backing("doomed.txt")); err != nil {
		t.Fatal(err)
	}
	h.mountRename("old-name.txt", "new-name.txt")
	h.put("created.txt", "new\n")
	h.put("pic.bin", "\x00\x02binary")

	d, err := sessionDiff(ctx, h, SessionQuery{Since: "start"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "session.diff", d)

	only, err := sessionDiff(ctx, h, SessionQuery{Since: "start", Paths: []string{"edited.txt"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "session-edited.diff", only)
}

// The agent names the files: a path with a control character is quoted in
// every header, as git quotes it, so a newline in a name cannot forge a
// header nor an escape sequence rewrite the reviewer's screen.
func TestSessionDiffQuotesNames(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.put("x\ny.txt", "one\n")
	h.put("tab\tname", "moved\n")
	h.put("bin\x1b[2K", "\x00old")
	if _, err := h.store.Checkpoint(ctx, "start", nil); err != nil {
		t.Fatal(err)
	}
	h.put("x\ny.txt", "two\n")
	h.mountRename("tab\tname", "esc\x1b[2K")
	h.put("bin\x1b[2K", "\x00new")

	d, err := sessionDiff(ctx, h, SessionQuery{Since: "start"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `diff --git "a/bin\033[2K" "b/bin\033[2K"
Binary files "a/bin\033[2K" and "b/bin\033[2K" differ
diff --git "a/tab\tname" "b/esc\033[2K"
rename from "tab\tname"
rename to "esc\033[2K"
diff --git "a/x\ny.txt" "b/x\ny.txt"
--- "a/x\ny.txt"
+++ "b/x\ny.txt"
@@ -1 +1 @@
-one
+two
`
	if d != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", d, want)
	}
}
