package versionstore

import (
	"os"
	"testing"
)

// While the mount has unflushed writes to a file, tool mutations are
// refused, as being written (not as changed: nothing may have changed):
// publishing a new inode would strand those writes in the old one.
func TestDirtyRefusesToolMutations(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "one")
	v := ts.version("f")
	ts.markWriting("f")
	_, err := ts.edit("f", Edit{Old: "one", New: "two"}, &v)
	wantErr(t, err, ReasonMountWriting, "", "/ws/f")
	_, err = ts.write("f", "two", anyway)
	wantErr(t, err, ReasonMountWriting, "write", "/ws/f")

	w := Writer{Kind: WriterMount, Pid: 42, Uid: 1000, Comm: "vim"}
	unlock := ts.locks.Lock("f")
	ts.put("f", "one, saved")
	got, err := ts.mount.Refresh("f", w)
	ts.doneWriting("f") // the mount: the writer's last release
	unlock()
	must(t, err)
	if got != SumString("one, saved") {
		t.Fatal("Refresh did not hash the bytes on disk")
	}
	if _, err := ts.edit("f", Edit{Old: "saved", New: "edited"}, &got); err != nil {
		t.Fatalf("edit after the commit: %v", err)
	}
	h, _ := ts.History("f")
	if len(h) < 2 || h[1].Writer != w {
		t.Fatalf("history = %+v, want the mount writer before the tool edit", h)
	}
}

// A renamed directory keeps its files' versions and history.
func TestMoveTree(t *testing.T) {
	ts := openTestStore(t)
	_, err := ts.write("a/x", "x", anyway)
	must(t, err)
	_, err = ts.write("a/sub/y", "y", anyway)
	must(t, err)
	_, err = ts.write("ab", "not under a/", anyway)
	must(t, err)
	must(t, os.Rename(ts.path("a"), ts.path("b")))
	must(t, ts.mount.MoveTree("a", "b", External))
	for _, k := range []string{"b/x", "b/sub/y", "ab"} {
		if h, _ := ts.History(k); len(h) != 1 {
			t.Errorf("%s: history %+v", k, h)
		}
	}
	for _, k := range []string{"a/x", "a/sub/y"} {
		if h, _ := ts.History(k); len(h) != 0 {
			t.Errorf("%s: history left behind %+v", k, h)
		}
	}
	st, err := ts.Stats()
	must(t, err)
	if st.Files != 3 {
		t.Fatalf("stats = %+v", st)
	}
}
