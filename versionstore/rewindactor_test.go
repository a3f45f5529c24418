package versionstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
)

// The writers of these tests: actor A's tool calls and its shell (a process
// the mount attributed to A), actor B's shell, and a shell nobody
// registered.
var (
	toolA    = ToolWriter("A")
	shellA   = Writer{Kind: WriterMount, Pid: 71, Comm: "sh", Actor: "A"}
	shellB   = Writer{Kind: WriterMount, Pid: 72, Comm: "sh", Actor: "B"}
	shellNo  = Writer{Kind: WriterMount, Pid: 73, Comm: "sh"}
	rewinder = Writer{Kind: WriterRestore, Actor: "alice"}
)

// writeBy writes content to rel through the mount, as w.
func (ts *testStore) writeBy(w Writer, rel, content string) {
	ts.t.Helper()
	unlock := ts.locks.Lock(rel)
	defer unlock()
	absent := ts.mount.Preserve(rel)
	ts.put(rel, content)
	if absent {
		ts.mount.Created(rel)
	}
	if _, err := ts.mount.Refresh(rel, w); err != nil {
		ts.t.Fatal(err)
	}
}

// removeBy removes rel through the mount, as w.
func (ts *testStore) removeBy(w Writer, rel string) {
	ts.t.Helper()
	unlock := ts.locks.Lock(rel)
	defer unlock()
	ts.mount.Preserve(rel)
	must(ts.t, os.Remove(ts.path(rel)))
	if _, err := ts.mount.Refresh(rel, w); err != nil {
		ts.t.Fatal(err)
	}
}

// renameBy renames from to to through the mount, as w.
func (ts *testStore) renameBy(w Writer, from, to string) {
	ts.t.Helper()
	unlock := ts.locks.Lock2(from, to)
	defer unlock()
	ts.mount.Preserve(from)
	absent := ts.mount.Preserve(to)
	must(ts.t, os.Rename(ts.path(from), ts.path(to)))
	ts.mount.NoteRename(from, to)
	if absent {
		ts.mount.Created(to)
	}
	for _, k := range []string{from, to} {
		if _, err := ts.mount.Refresh(k, w); err != nil {
			ts.t.Fatal(err)
		}
	}
}

// checkpointed opens a store holding files, checkpointed as "cp".
func checkpointed(t *testing.T, files map[string]string) *testStore {
	ts := openTestStore(t)
	for rel, content := range files {
		ts.put(rel, content)
	}
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	return ts
}

// wantFiles fails unless each file holds its content ("": absent).
func (ts *testStore) wantFiles(why string, want map[string]string) {
	ts.t.Helper()
	for rel, content := range want {
		got, err := os.ReadFile(ts.path(rel))
		switch {
		case content == "" && !os.IsNotExist(err):
			ts.t.Errorf("%s: %s exists (%q), want it absent", why, rel, got)
		case content != "" && string(got) != content:
			ts.t.Errorf("%s: %s = %q (%v), want %q", why, rel, got, err, content)
		}
	}
}

// A rewind of actor A's changes undoes its tool writes and its shell's
// writes, creations, deletions and renames, and leaves B's and an
// unattributed shell's changes; a rewind of the rewinder's changes since
// the checkpoint it made first undoes it, and only it.
func TestRewindActorRevertsOnlyTheActorsChanges(t *testing.T) {
	ts := checkpointed(t, map[string]string{"tool.txt": "t0\n", "shell.txt": "s0\n", "gone.txt": "g0\n",
		"old.txt": "o0\n", "b.txt": "b0\n", "other.txt": "x0\n"})
	if _, err := ts.WriteText(context.Background(), ts.target("tool.txt"), "t1 by A's tool\n", Intent{}, toolA); err != nil {
		t.Fatal(err)
	}
	ts.writeBy(shellA, "shell.txt", "s1 by A's shell\n")
	ts.writeBy(shellA, "new.txt", "made by A\n")
	ts.removeBy(shellA, "gone.txt")
	ts.renameBy(shellA, "old.txt", "moved.txt")
	ts.writeBy(shellB, "b.txt", "b1 by B\n")
	ts.writeBy(shellB, "b-new.txt", "made by B\n")
	ts.writeBy(shellNo, "other.txt", "x1 by nobody's shell\n")

	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Actor: "A", Writer: rewinder})
	if err != nil || res.Conflicts != 0 || res.Refused || len(res.Actions) != 6 {
		t.Fatalf("rewind --actor A: %+v, %v; want 6 files changed, no conflict", res, err)
	}
	ts.wantFiles("after rewind --actor A", map[string]string{"tool.txt": "t0\n", "shell.txt": "s0\n", "new.txt": "",
		"gone.txt": "g0\n", "old.txt": "o0\n", "moved.txt": "", "b.txt": "b1 by B\n", "b-new.txt": "made by B\n",
		"other.txt": "x1 by nobody's shell\n"})

	// Undone as one step: the rewinder's changes since the checkpoint it
	// made, B's later write kept.
	ts.writeBy(shellB, "b.txt", "b2 by B, after\n")
	undo, err := ts.Rewind(context.Background(), res.Before, RewindOptions{Actor: rewinder.Actor, Writer: rewinder})
	if err != nil || undo.Conflicts != 0 || len(undo.Actions) != 6 {
		t.Fatalf("undo: %+v, %v", undo, err)
	}
	ts.wantFiles("after undoing it", map[string]string{"tool.txt": "t1 by A's tool\n", "new.txt": "made by A\n",
		"gone.txt": "", "old.txt": "", "moved.txt": "o0\n", "b.txt": "b2 by B, after\n"})
}

// A file another writer changed after A did is a conflict, with its three
// versions (before A, A's, now) and who changed it; nothing at all is
// changed unless Partial, which changes the rest and leaves the conflict.
func TestRewindActorConflictWhereAnotherChangedAfter(t *testing.T) {
	for _, partial := range []bool{false, true} {
		ts := checkpointed(t, map[string]string{"both.txt": "0\n", "mid.txt": "m0\n", "only-a.txt": "a0\n"})
		before := ts.version("both.txt")
		ts.writeBy(shellA, "both.txt", "1 by A\n")
		byA := ts.version("both.txt")
		ts.writeBy(shellB, "both.txt", "2 by B\n")
		now := ts.version("both.txt")
		ts.writeBy(shellA, "mid.txt", "m1 by A\n")
		ts.writeBy(shellNo, "mid.txt", "m2 by nobody\n")
		ts.writeBy(shellA, "mid.txt", "m3 by A\n")
		ts.writeBy(shellA, "only-a.txt", "a1 by A\n")

		res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Actor: "A", Partial: partial, Writer: rewinder})
		if err != nil || res.Conflicts != 2 || res.Refused == partial {
			t.Fatalf("partial %v: %+v, %v; want 2 conflicts, refused %v", partial, res, err, !partial)
		}
		var got *RewindAction
		for i := range res.Actions {
			if res.Actions[i].Path == "both.txt" {
				got = &res.Actions[i]
			}
		}
		if got == nil || got.Err == nil || got.To != before || got.ActorVersion != byA || got.From != now ||
			got.ChangedBy == nil || got.ChangedBy.Actor != "B" {
			t.Fatalf("partial %v: both.txt's action %+v; want a conflict from %s (now) by B, A's %s, before %s",
				partial, got, now.Short(), byA.Short(), before.Short())
		}
		want := map[string]string{"both.txt": "2 by B\n", "mid.txt": "m3 by A\n", "only-a.txt": "a1 by A\n"}
		if partial {
			want["only-a.txt"] = "a0\n"
		} else if res.Before != "" {
			t.Errorf("a refused rewind made checkpoint %s", res.Before)
		}
		ts.wantFiles(fmt.Sprintf("partial %v", partial), want)
	}
}

// A file another writer changes after the rewind has looked at it, before
// its turn, is a conflict and keeps that writer's bytes: the rewind changes
// a file only while it is still at the actor's version.
func TestRewindActorLeavesAFileChangedAfterTheLook(t *testing.T) {
	ts := checkpointed(t, map[string]string{"f.txt": "0\n"})
	ts.writeBy(shellA, "f.txt", "1 by A\n")
	raced := false
	progress := func(done, total int) {
		if total == 2 && done == 1 && !raced { // one file looked at, not changed yet
			raced = true
			ts.writeBy(shellB, "f.txt", "2 by B, meanwhile\n")
		}
	}
	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Actor: "A", Writer: rewinder, Progress: progress})
	if err != nil || !raced || res.Conflicts != 1 || !errors.Is(res.Actions[0].Err, ErrChangedSinceLooked) {
		t.Fatalf("rewind %+v, %v (raced: %v); want one conflict", res, err, raced)
	}
	ts.wantFiles("after the rewind", map[string]string{"f.txt": "2 by B, meanwhile\n"})
}
