package versionstore

import (
	"context"
	"fmt"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestMergeRollBackAtOpen: a merge cut after some of its files (the store
// closed with its intent left, as a crash leaves it) is rolled back when
// the store opens again: each file applied, removed, or torn as a power
// cut leaves it, holds its bytes from before the merge; one changed after
// the merge wrote it is left; the merge's checkpoint is gone only when
// nothing was left, and the merge then runs again as new.
func TestMergeRollBackAtOpen(t *testing.T) {
	for _, later := range []bool{false, true} {
		t.Run(fmt.Sprintf("changed-after=%v", later), func(t *testing.T) {
			testMergeRollBack(t, later)
		})
	}
}

func testMergeRollBack(t *testing.T, later bool) {
	ts := openTestStore(t)
	ctx := context.Background()
	keys := []string{"a.txt", "b.txt", "c.txt", "gone.txt", "torn.txt", "later.txt", "untouched.txt", "unrecorded.txt"}
	for _, k := range keys {
		ts.put(k, k+" before\n")
	}
	if _, err := ts.MarkCheckpoint("branch:x"); err != nil { // as branch new: the index knows none of them
		t.Fatal(err)
	}
	var changes []BranchChange
	for _, k := range keys {
		c := BranchChange{Key: k, Version: SumString(k + " branch\n"), Data: []byte(k + " branch\n")}
		if k == "gone.txt" {
			c = BranchChange{Key: k}
		}
		changes = append(changes, c)
	}
	changes = append(changes, BranchChange{Key: "new.txt", Version: SumString("new\n"), Data: []byte("new\n")})
	cp, err := ts.findCheckpoint("branch:x")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ts.mergePlan(cp, changes)
	if err != nil || res.Conflicts != 0 {
		t.Fatalf("plan: %+v, %v", res, err)
	}
	if res.Step, err = ts.mergeStep("x"); err != nil {
		t.Fatal(err)
	}
	if err := ts.mergeBegin(res.Step, res.Items, applicable(res.Items)); err != nil {
		t.Fatal(err)
	}
	// The cut: all but untouched.txt applied, torn.txt then torn.
	w := Writer{Kind: WriterRestore, Actor: res.Step}
	for i, it := range res.Items {
		if it.Path == "untouched.txt" {
			continue
		}
		if it.Path == "unrecorded.txt" { // published, cut before its commit
			if err := os.WriteFile(ts.path(it.Path), changes[i].Data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := ts.mergeOne(ctx, it, changes[i].Data, 0, w); err != nil {
			t.Fatalf("apply %s: %v", it.Path, err)
		}
	}
	if err := os.WriteFile(ts.path("torn.txt"), []byte("torn.txt br"), 0o644); err != nil {
		t.Fatal(err)
	}
	if later {
		ts.put("later.txt", "changed after the merge\n")
	}
	ts.reopen()

	for _, k := range keys {
		want := k + " before\n"
		if k == "later.txt" && later {
			want = "changed after the merge\n"
		}
		if got := ts.get(k); got != want {
			t.Errorf("%s after the rollback = %q, want %q", k, got, want)
		}
	}
	if _, err := os.Lstat(ts.path("new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt, made by the merge, after the rollback: %v", err)
	}
	_, err = ts.findCheckpoint("merge:x")
	if gone := err != nil; gone == later {
		t.Errorf("checkpoint merge:x after the rollback: %v (a file left as changed after the merge: %v)", err, later)
	}
	if !later {
		plan, err := ts.Merge(ctx, "x", "branch:x", changes, MergeOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range plan.Items {
			if it.Op != "write" && it.Op != "remove" {
				t.Errorf("%s planned again after the rollback: %+v, want applied", it.Path, it)
			}
		}
		again, err := ts.Merge(ctx, "x", "branch:x", changes, MergeOptions{})
		if err != nil || again.Applied != len(changes) || again.Step != "merge:x" {
			t.Fatalf("merge again: %+v, %v", again, err)
		}
		if got := ts.get("untouched.txt"); got != "untouched.txt branch\n" {
			t.Errorf("untouched.txt after merging again = %q", got)
		}
	}
	assertNoIntents(t, ts)
}

func assertNoIntents(t *testing.T, ts *testStore) {
	t.Helper()
	if err := ts.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketMerges).Cursor().First(); k != nil {
			t.Errorf("a merge's intent is left: %q", k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
