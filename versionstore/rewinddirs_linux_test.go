package versionstore

import (
	"context"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A rewind removes the directories made since the checkpoint that it
// emptied, deepest first, and no other: not one that held a file then, not
// one that still holds something (here a symlink, which has no version),
// not one that was there, empty, at the checkpoint (its birth time says so).
func TestRewindRemovesDirectoriesItEmptied(t *testing.T) {
	ts := openTestStore(t)
	ts.put("old/keep.txt", "kept\n")
	must(t, os.Mkdir(ts.path("empty-then"), 0o755))
	time.Sleep(birthSlack + 100*time.Millisecond) // born well before the checkpoint
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"new/sub/x.txt", "old/new/y.txt", "empty-then/z.txt", "busy/w.txt"} {
		ts.put(f, "new\n")
	}
	must(t, os.Symlink("w.txt", ts.path("busy/link")))

	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	must(t, err)
	if res.Conflicts != 0 || len(removedFiles(res.Actions)) != 4 {
		t.Fatalf("rewind: %+v, want 4 files removed", res)
	}
	for _, gone := range []string{"new/sub", "new", "old/new"} {
		if _, err := os.Lstat(ts.path(gone)); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it removed", gone, err)
		}
	}
	for _, stays := range []string{"old", "old/keep.txt", "busy", "busy/link"} {
		if _, err := os.Lstat(ts.path(stays)); err != nil {
			t.Errorf("%s: %v, want it left", stays, err)
		}
	}
	if _, known := bornAt(unix.AT_FDCWD, ts.path("old")); known {
		if _, err := os.Lstat(ts.path("empty-then")); err != nil {
			t.Errorf("empty-then, there at the checkpoint: %v, want it left", err)
		}
	}
}

// rmdirNew never follows a symlink where the directory was, never removes
// a directory that holds anything, and removes an empty one only if it was
// born after the time given (all of these were, but where birth times are
// unknown).
func TestRmdirNewOnlyEmptyDirectories(t *testing.T) {
	ts := openTestStore(t)
	must(t, os.Mkdir(ts.path("target"), 0o755))
	must(t, os.Symlink("target", ts.path("link")))
	ts.put("full/f.txt", "f\n")
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for _, key := range []string{"link", "full"} {
		if ts.rmdirNew(key, past) {
			t.Errorf("rmdirNew(%q) removed something", key)
		}
	}
	for _, stays := range []string{"target", "link", "full/f.txt"} {
		if _, err := os.Lstat(ts.path(stays)); err != nil {
			t.Errorf("%s: %v", stays, err)
		}
	}
	if _, known := bornAt(unix.AT_FDCWD, ts.path("target")); known && ts.rmdirNew("target", future) {
		t.Error("rmdirNew(target), born before the time given: removed")
	}
	if !ts.rmdirNew("target", past) {
		t.Error("rmdirNew(target), empty and new: not removed")
	}
}
