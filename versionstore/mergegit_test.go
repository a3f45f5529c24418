package versionstore

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// TestChangedSince: a path written since the checkpoint counts only while
// its bytes differ from those then; a path made since counts; match picks.
func TestChangedSince(t *testing.T) {
	ts := openTestStore(t)
	write := journaledWrite(ts)
	write("r/HEAD", "ref: refs/heads/main\n")
	write("r/refs/heads/main", "c0\n")
	write("r/refs/heads/back", "c0\n")
	write("other.txt", "o\n")
	if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
		t.Fatal(err)
	}
	write("r/refs/heads/main", "c1\n")
	write("r/refs/heads/back", "c1\n")
	write("r/refs/heads/back", "c0\n")
	write("r/refs/tags/t", "c1\n")
	write("other.txt", "o2\n")
	got, err := ts.ChangedSince("branch:x", func(key string) bool { return strings.HasPrefix(key, "r/") })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"r/refs/heads/main", "r/refs/tags/t"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ChangedSince = %q, want %q", got, want)
	}
	if _, err := ts.ChangedSince("no-such", func(string) bool { return true }); err == nil {
		t.Error("ChangedSince of no checkpoint: no error")
	}
}

// TestMergeForce: a forced change is planned against the workspace's bytes
// now, not at the branch point: it replaces a file made since, where an
// ordinary change would be add/add.
func TestMergeForce(t *testing.T) {
	ts := openTestStore(t)
	ctx := context.Background()
	if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
		t.Fatal(err)
	}
	journaledWrite(ts)("ref", "c1\n")
	change := BranchChange{Key: "ref", Version: SumString("c2\n"), Data: []byte("c2\n")}
	res, err := ts.Merge(ctx, "x", "branch:x", []BranchChange{change}, MergeOptions{DryRun: true})
	if err != nil || res.Items[0].Conflict != ConflictAddAdd {
		t.Fatalf("merge = %+v, %v; want add/add", res, err)
	}
	change.Force = true
	res, err = ts.Merge(ctx, "x", "branch:x", []BranchChange{change}, MergeOptions{})
	if err != nil || res.Applied != 1 {
		t.Fatalf("forced merge = %+v, %v", res, err)
	}
	if got := ts.get("ref"); got != "c2\n" {
		t.Errorf("ref after the forced merge = %q", got)
	}
	if ok, err := ts.Exists("ref"); !ok || err != nil {
		t.Errorf("Exists(ref) = %v, %v", ok, err)
	}
	for _, key := range []string{"no/such", "ref/below"} {
		if ok, err := ts.Exists(key); ok || err != nil {
			t.Errorf("Exists(%s) = %v, %v", key, ok, err)
		}
	}
}

// journaledWrite writes files as a tool does, so the journal records them.
func journaledWrite(ts *testStore) func(rel, content string) {
	return func(rel, content string) {
		ts.t.Helper()
		if _, err := ts.WriteText(context.Background(), ts.target(rel), content, Intent{}, ToolWriter("t")); err != nil {
			ts.t.Fatal(err)
		}
	}
}

func TestGitPath(t *testing.T) {
	for _, tc := range []struct {
		key, repo, rel string
		ok             bool
	}{
		{".git/HEAD", ".git", "HEAD", true},
		{"sub/dir/.git/refs/heads/main", "sub/dir/.git", "refs/heads/main", true},
		{".git/modules/m/HEAD", ".git", "modules/m/HEAD", true},
		{".git", "", "", false}, // a worktree's or submodule's .git file
		{"sub/.git", "", "", false},
		{"a.git/HEAD", "", "", false},
		{"src/main.go", "", "", false},
	} {
		repo, rel, ok := GitPath(tc.key)
		if repo != tc.repo || rel != tc.rel || ok != tc.ok {
			t.Errorf("GitPath(%q) = %q, %q, %v; want %q, %q, %v", tc.key, repo, rel, ok, tc.repo, tc.rel, tc.ok)
		}
	}
}

// TestRewindMergeKeepsGitObjects: a rewind of a merge takes back the files
// it wrote but leaves the git objects it brought.
func TestRewindMergeKeepsGitObjects(t *testing.T) {
	ts := openTestStore(t)
	ctx := context.Background()
	if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
		t.Fatal(err)
	}
	obj := "sub/.git/objects/01/23456789abcdef0123456789abcdef01234567"
	changes := []BranchChange{{Key: obj, Version: SumString("z"), Data: []byte("z")},
		{Key: "sub/.git/refs/heads/main", Version: SumString("c\n"), Data: []byte("c\n")},
		{Key: "a.txt", Version: SumString("a\n"), Data: []byte("a\n")}}
	res, err := ts.Merge(ctx, "x", "branch:x", changes, MergeOptions{})
	if err != nil || res.Applied != 3 {
		t.Fatalf("merge = %+v, %v", res, err)
	}
	if _, err := ts.Rewind(ctx, res.Step, RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{obj: true, "sub/.git/refs/heads/main": false, "a.txt": false} {
		if ok, err := ts.Exists(key); ok != want || err != nil {
			t.Errorf("after the rewind, Exists(%s) = %v, %v; want %v", key, ok, err, want)
		}
	}
}
