package versionstore

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A merge creates a new file with the branch file's permission bits (a
// 0600 secret stays 0600, an executable stays one), and writes an existing
// file keeping its mode.
func TestMergeKeepsModes(t *testing.T) {
	ts := openTestStore(t)
	must(t, os.WriteFile(filepath.Join(ts.dir, "kept.sh"), []byte("a\n"), 0o750))
	must(t, os.Chmod(filepath.Join(ts.dir, "kept.sh"), 0o750))
	if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
		t.Fatal(err)
	}
	changes := []BranchChange{
		branchChange("kept.sh", "b\n", 0o644),
		branchChange("new.env", "TOKEN=1\n", 0o600),
		branchChange("new.sh", "#!/bin/sh\n", 0o755),
	}
	res, err := ts.Merge(t.Context(), "x", "branch:x", changes, MergeOptions{})
	if err != nil || res.Applied != 3 {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	for name, want := range map[string]os.FileMode{"kept.sh": 0o750, "new.env": 0o600, "new.sh": 0o755 & (ts.fileMode | 0o111)} {
		fi, err := os.Stat(filepath.Join(ts.dir, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", name, fi.Mode(), err, want)
		}
	}
}

// A root daemon merges a change to a file another user owns, which keeps
// its owner, group and mode.
func TestMergeOtherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to nobody")
	}
	ts := openTestStore(t)
	p := filepath.Join(ts.dir, "a.txt")
	must(t, os.WriteFile(p, []byte("a\n"), 0o640))
	must(t, os.Chown(p, 65534, 65534))
	if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
		t.Fatal(err)
	}
	res, err := ts.Merge(t.Context(), "x", "branch:x", []BranchChange{branchChange("a.txt", "a-branch\n", 0o644)}, MergeOptions{})
	if err != nil || res.Applied != 1 {
		t.Fatalf("merge: %+v, %v", res, err)
	}
	b, _ := os.ReadFile(p)
	var st syscall.Stat_t
	must(t, syscall.Stat(p, &st))
	if string(b) != "a-branch\n" || st.Uid != 65534 || st.Gid != 65534 || st.Mode&0o7777 != 0o640 {
		t.Errorf("a.txt: %q uid %d gid %d mode %o; want the branch's bytes, nobody's, 0640", b, st.Uid, st.Gid, st.Mode&0o7777)
	}
}

// A merge refused for an owner says it is the merge's, and why.
func TestMergeErrorSaysMerge(t *testing.T) {
	err := asMergeError(fail(ReasonOwnerChanged, "restore", "a.txt"))
	if s := err.Error(); !strings.Contains(s, `merge "a.txt"`) || !strings.Contains(s, "merge again") {
		t.Errorf("error %q: want the merge named, and its cause", s)
	}
}

func branchChange(key, data string, perm os.FileMode) BranchChange {
	return BranchChange{Key: key, Version: SumString(data), Data: []byte(data), Perm: perm}
}
