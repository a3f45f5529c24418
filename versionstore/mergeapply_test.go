package versionstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
)

// mergeApplyFixture is a workspace of n files and a branch changing them
// all, the checkpoint branch:x taken before.
func mergeApplyFixture(t *testing.T, n int) (*testStore, []BranchChange) {
	ts := openTestStore(t)
	var changes []BranchChange
	for i := range n {
		k := fmt.Sprintf("d%d/f%03d.txt", i*3/n, i) // in the order the merge applies them
		ts.put(k, k+" before\n")
		changes = append(changes, BranchChange{Key: k, Version: SumString(k + " branch\n"), Data: []byte(k + " branch\n")})
	}
	if _, err := ts.Checkpoint(context.Background(), "branch:x", nil); err != nil {
		t.Fatal(err)
	}
	return ts, changes
}

// TestMergeAppliesAll: a merge of more files than it applies at once
// applies every one, each recorded as the merge's, and leaves no intent.
func TestMergeAppliesAll(t *testing.T) {
	ts, changes := mergeApplyFixture(t, 5*mergeWorkers)
	res, err := ts.Merge(context.Background(), "x", "branch:x", changes, MergeOptions{})
	if err != nil || res.Applied != len(changes) || res.Refused {
		t.Fatalf("merge = %+v, %v", res, err)
	}
	for _, c := range changes {
		if got := ts.get(c.Key); got != string(c.Data) {
			t.Errorf("%s = %q, want %q", c.Key, got, c.Data)
		}
	}
	assertNoIntents(t, ts)
	ts.reopen() // nothing to roll back
	if got := ts.get(changes[0].Key); got != string(changes[0].Data) {
		t.Errorf("%s after a reopen = %q", changes[0].Key, got)
	}
}

// TestMergeRefusedMidwayUndoesAll: a file changed between the plan and
// its turn refuses the merge (without Partial), and every file the merge
// had applied meanwhile, on any of its workers, is taken back.
func TestMergeRefusedMidwayUndoesAll(t *testing.T) {
	ts, changes := mergeApplyFixture(t, 5*mergeWorkers)
	last := changes[len(changes)-1].Key
	var once sync.Once
	// At the first publish, every worker is on its first file: the last
	// one is not planned-and-applied yet, and changes under the merge.
	ts.beforePublish = func() {
		once.Do(func() {
			if err := os.WriteFile(ts.path(last), []byte("changed meanwhile\n"), 0o644); err != nil {
				t.Error(err)
			}
		})
	}
	res, err := ts.Merge(context.Background(), "x", "branch:x", changes, MergeOptions{})
	ts.beforePublish = nil
	if err != nil || !res.Refused || res.Applied != 0 || res.Conflicts == 0 {
		t.Fatalf("merge = %+v, %v; want refused, nothing applied", res, err)
	}
	for _, c := range changes[:len(changes)-1] {
		if got, want := ts.get(c.Key), c.Key+" before\n"; got != want {
			t.Errorf("%s = %q, want %q", c.Key, got, want)
		}
	}
	if got := ts.get(last); got != "changed meanwhile\n" {
		t.Errorf("%s = %q", last, got)
	}
	assertNoIntents(t, ts)
}

// TestMergeSyncFailureUndoesAll: when the sync that makes the merged files
// durable fails, the merge is taken back and says why, and its intent goes.
func TestMergeSyncFailureUndoesAll(t *testing.T) {
	ts, changes := mergeApplyFixture(t, 2*mergeWorkers)
	ts.mergeSyncFault = syscall.EIO
	res, err := ts.Merge(context.Background(), "x", "branch:x", changes, MergeOptions{})
	ts.mergeSyncFault = nil
	if !errors.Is(err, syscall.EIO) || !res.Refused || res.Applied != 0 {
		t.Fatalf("merge = %+v, %v; want refused with the sync's error", res, err)
	}
	for _, c := range changes {
		if got, want := ts.get(c.Key), c.Key+" before\n"; got != want {
			t.Errorf("%s = %q, want %q", c.Key, got, want)
		}
	}
	assertNoIntents(t, ts)
}
