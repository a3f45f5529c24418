package versionstore

import (
	"context"
	"os"
	"reflect"
	"sort"
	"testing"
	"time"
)

// The first checkpoint indexes the whole workspace and keeps every file's
// bytes, so a rewind gives back files dshfs never saw before it, changed
// or removed behind its back since, and removes files created behind its
// back since.
func TestCheckpointPinsTheWholeWorkspace(t *testing.T) {
	ts := openTestStore(t)
	ts.put("untouched.txt", "as it was\n")
	ts.put("doomed.txt", "soon gone\n")
	ts.put("deep/a/b.txt", "deep\n")
	cp, err := ts.Checkpoint(context.Background(), "start", nil)
	if err != nil || cp.Files != 3 {
		t.Fatalf("checkpoint %+v, %v: want 3 files", cp, err)
	}
	ts.put("untouched.txt", "changed behind dshfs's back\n")
	must(t, os.Remove(ts.path("doomed.txt")))
	ts.put("deep/a/new.txt", "created behind its back\n")

	dry, err := ts.Rewind(context.Background(), "start", RewindOptions{DryRun: true})
	if err != nil || len(dry.Actions) != 3 || dry.Conflicts != 0 {
		t.Fatalf("dry run %+v, %v", dry, err)
	}
	if _, err := ts.Rewind(context.Background(), "start", RewindOptions{Writer: ToolWriter("me")}); err != nil {
		t.Fatal(err)
	}
	if ts.get("untouched.txt") != "as it was\n" || ts.get("doomed.txt") != "soon gone\n" {
		t.Fatalf("after the rewind: untouched %q, doomed %q", ts.get("untouched.txt"), ts.get("doomed.txt"))
	}
	if _, err := os.Stat(ts.path("deep/a/new.txt")); !os.IsNotExist(err) {
		t.Fatalf("a file created behind dshfs's back after the checkpoint is still there (%v)", err)
	}
}

// A later walk reads only what changed: one lstat for the rest.
func TestSyncReadsOnlyWhatChanged(t *testing.T) {
	// Recorded an hour after they were written, as a walk long after the
	// files' last change would be: their fingerprints are settled.
	ts := openTestStore(t, func(o *Options) { o.Now = func() time.Time { return time.Now().Add(time.Hour) } })
	for _, f := range []string{"a", "b", "c", "d"} {
		ts.put(f, f)
	}
	st, err := ts.Sync(context.Background(), nil)
	if err != nil || st.Files != 4 || st.Read != 4 || st.Kept != 4 {
		t.Fatalf("first walk %+v, %v: want all 4 read and kept", st, err)
	}
	ts.put("b", "changed")
	st, err = ts.Sync(context.Background(), nil)
	if err != nil || st.Files != 4 || st.Read != 1 {
		t.Fatalf("second walk %+v, %v: want only b read", st, err)
	}
}

// Over the retention budget, a walk records versions without keeping bytes.
func TestSyncKeepsWithinTheBudget(t *testing.T) {
	ts := openTestStore(t)
	ts.put("a", "aaaa")
	ts.put("b", "bbbb")
	ts.retain.budget = ts.retain.kept() + 1 // room for what the index holds now
	st, err := ts.Sync(context.Background(), nil)
	if err != nil || st.Read != 2 || st.Skipped != 1 {
		t.Fatalf("walk %+v, %v: want the second file read but not kept", st, err)
	}
}

func TestChangesListTheWorkspaceNewestFirst(t *testing.T) {
	ts := openTestStore(t)
	ts.put("kept.txt", "one\n")
	cp, err := ts.Checkpoint(context.Background(), "start", nil)
	must(t, err)
	ts.toolWrite("kept.txt", "two\n")
	ts.mountWrite("new.txt", "made\n")
	ts.mountRename("new.txt", "moved.txt")
	ts.mountRemove("kept.txt")
	ts.put("outside.txt", "behind its back\n")
	if _, err := ts.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	all, err := ts.Changes(ChangeQuery{After: cp.Seq})
	must(t, err)
	type row struct{ path, op, from, to string }
	var got []row
	for _, c := range all {
		got = append(got, row{c.Path, c.Op, c.From, c.To})
	}
	want := []row{
		{"outside.txt", "create", "", ""},
		{"kept.txt", "delete", "", ""},
		{"new.txt", "rename", "", "moved.txt"},
		{"moved.txt", "rename", "new.txt", ""},
		{"new.txt", "create", "", ""},
		{"kept.txt", "write", "", ""},
	}
	// The two halves of the rename come in one batch, in either order.
	sort.SliceStable(got[2:4], func(i, j int) bool { return got[2+i].path > got[2+j].path })
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes since the checkpoint:\n got %v\nwant %v", got, want)
	}
	some, err := ts.Changes(ChangeQuery{After: cp.Seq, Paths: []string{"moved.txt"}})
	if err != nil || len(some) != 2 {
		t.Fatalf("changes of moved.txt: %+v, %v; want both halves of its rename", some, err)
	}
}

func TestExcluded(t *testing.T) {
	for _, tc := range []struct {
		key      string
		patterns []string
		want     bool
	}{
		{".git/HEAD", []string{".git"}, true},
		{"sub/.git/objects/ab/cd", []string{".git"}, true},
		{"src/.gitignore", []string{".git"}, false},
		{"logs/x.log", []string{"*.log"}, true},
		{"build/out/a.o", []string{"build/out"}, true},
		{"src/build/out/a.o", []string{"build/out"}, false},
		{"main.go", []string{".git", "*.log"}, false},
	} {
		if got := Excluded(tc.key, tc.patterns); got != tc.want {
			t.Errorf("Excluded(%q, %q) = %v, want %v", tc.key, tc.patterns, got, tc.want)
		}
	}
}

// The log and a file's history say why a version's bytes are not kept.
func TestNotKeptSaysWhy(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.CaptureMaxBytes = 8 })
	ts.retain.budget = ts.retain.kept() + 3 // room for what the index holds now
	ts.put("a", "aaaa")                     // kept: the store is under budget
	ts.put("b", "bbbb")                     // read when the budget is full
	ts.put("big", "larger than the limit")  // over the capture limit
	if _, err := ts.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	ts.put("a", "later") // its first version's bytes are then dropped by gc
	ts.version("a")
	ts.retain.budget = 1 // (the index's pages count by the page: 4 KiB, not 4 bytes)
	if _, err := ts.GC(nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		idx  int
		want string
	}{
		{"big", 0, NotKeptTooLarge},
		{"b", 0, NotKeptBudget},
		{"a", 1, NotKeptCollected},
	} {
		h, err := ts.History(tc.key)
		if err != nil || len(h) <= tc.idx || h[tc.idx].NotKept != tc.want || h[tc.idx].Kept {
			t.Errorf("history of %s: %+v, %v; want entry %d not kept: %q", tc.key, h, err, tc.idx, tc.want)
		}
	}
}
