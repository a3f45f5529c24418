package versionstore

import (
	"context"
	"os"
	"slices"
	"testing"
)

// logOps is the log's changes to paths as "op path", newest first.
func logOps(t *testing.T, ts *testStore) []string {
	t.Helper()
	cs, err := ts.Changes(ChangeQuery{})
	must(t, err)
	var ops []string
	for _, c := range cs {
		op := c.Op + " " + c.Path
		if c.Via != "" {
			op += " via " + c.Via
		}
		ops = append(ops, op)
	}
	return ops
}

// writeAs records key's bytes as the mount would after pid wrote them.
func (ts *testStore) writeAs(key, content string, pid uint32) {
	ts.t.Helper()
	unlock := ts.locks.Lock(key)
	defer unlock()
	if content != "" {
		ts.put(key, content)
	}
	_, err := ts.mount.Refresh(key, Writer{Kind: WriterMount, Pid: pid, Comm: "sed"})
	must(ts.t, err)
}

// The log folds a rename-save (sed -i: a temporary file written and
// renamed over the file) and a checkout's unlink-and-create into the one
// change of content each makes; the journal, which rewind reads, keeps
// every step.
func TestLogFoldsReplacementSteps(t *testing.T) {
	ts := openTestStore(t)
	_, err := ts.WriteText(context.Background(), Target{Key: "f", Display: "/ws/f"}, "one\n", Intent{}, ToolWriter("t"))
	must(t, err)
	_, err = ts.WriteText(context.Background(), Target{Key: "g", Display: "/ws/g"}, "one\n", Intent{}, ToolWriter("t"))
	must(t, err)

	// sed -i f: sedXYZ created and written, renamed over f.
	ts.mount.Created("sedXYZ")
	ts.writeAs("sedXYZ", "two\n", 7)
	unlock := ts.locks.Lock2("sedXYZ", "f")
	must(t, os.Rename(ts.path("sedXYZ"), ts.path("f")))
	ts.mount.NoteRename("sedXYZ", "f")
	must(t, ts.mount.MoveTree("sedXYZ", "f", Writer{Kind: WriterMount, Pid: 7, Comm: "sed"}))
	unlock()
	// git checkout g: unlinked, then created again by the same process.
	must(t, os.Remove(ts.path("g")))
	ts.writeAs("g", "", 8)
	ts.writeAs("g", "three\n", 8)
	// Another process's deletion and creation stay two changes.
	must(t, os.Remove(ts.path("g")))
	ts.writeAs("g", "", 8)
	ts.writeAs("g", "four\n", 9)

	want := []string{"create g", "delete g", "write g", "write f via sedXYZ", "create g", "create f"}
	if got := logOps(t, ts); !slices.Equal(got, want) {
		t.Fatalf("log %q, want %q", got, want)
	}
	raw, err := ts.changes(ChangeQuery{})
	must(t, err)
	if len(raw) < len(want)+3 {
		t.Fatalf("the journal has %d entries: its steps are folded in the log only", len(raw))
	}
}

// sed -i whose temporary file is let go only after its rename: the
// temporary name never had a version, so the journal holds the arrival
// alone, and the log still reads it as the one write it was.
func TestLogFoldsASaveWhoseTemporaryFileWasNeverCommitted(t *testing.T) {
	ts := openTestStore(t)
	_, err := ts.WriteText(context.Background(), Target{Key: "f", Display: "/ws/f"}, "one\n", Intent{}, ToolWriter("t"))
	must(t, err)
	sed := Writer{Kind: WriterMount, Pid: 7, Comm: "sed"}
	ts.mount.Created("sedXYZ")
	ts.put("sedXYZ", "two\n")
	unlock := ts.locks.Lock2("sedXYZ", "f")
	must(t, os.Rename(ts.path("sedXYZ"), ts.path("f")))
	ts.mount.NoteRename("sedXYZ", "f")
	_, err = ts.mount.Refresh("sedXYZ", sed) // gone; f is still being written
	must(t, err)
	unlock()
	ts.writeAs("f", "", 7) // the release, under the new name

	if got, want := logOps(t, ts), []string{"write f via sedXYZ", "create f"}; !slices.Equal(got, want) {
		t.Fatalf("log %q, want %q", got, want)
	}
}
