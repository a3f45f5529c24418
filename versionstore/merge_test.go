package versionstore

import (
	"context"
	"testing"
)

func TestMergeClassify(t *testing.T) {
	a, b, c := SumString("a"), SumString("b"), SumString("c")
	var none Version
	for _, tc := range []struct {
		name               string
		base, main, branch Version
		unknown, writing   bool
		op, conflict       string
	}{
		{"branch unchanged", a, b, a, false, false, "same", ""},
		{"same bytes both sides", a, b, b, false, false, "same", ""},
		{"branch only", a, a, b, false, false, "write", ""},
		{"branch deleted", a, a, none, false, false, "remove", ""},
		{"branch created", none, none, b, false, false, "write", ""},
		{"modify/modify", a, b, c, false, false, "conflict", ConflictModify},
		{"modify/delete", a, none, c, false, false, "conflict", ConflictModifyDelete},
		{"delete/modify", a, b, none, false, false, "conflict", ConflictModifyDelete},
		{"add/add", none, b, c, false, false, "conflict", ConflictAddAdd},
		{"add/add same", none, b, b, false, false, "same", ""},
		{"being written", a, a, b, false, true, "conflict", ConflictWriting},
		{"unknown base", a, a, b, true, false, "conflict", ConflictUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, conflict := classify(MergeItem{Base: tc.base, Main: tc.main, Branch: tc.branch}, tc.unknown, tc.writing)
			if op != tc.op || conflict != tc.conflict {
				t.Errorf("classify = %q, %q; want %q, %q", op, conflict, tc.op, tc.conflict)
			}
		})
	}
}

// TestMergeStep: a branch's change the workspace did not make is applied,
// one both made is a conflict that applies nothing (or, with Partial, is
// left alone), and a rewind of the merge's step undoes the merge alone.
func TestMergeStep(t *testing.T) {
	ts := openTestStore(t)
	ctx := context.Background()
	ts.put("a.txt", "a0\n")
	ts.put("b.txt", "b0\n")
	a0, b0 := ts.version("a.txt"), ts.version("b.txt")
	if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.WriteText(ctx, ts.target("b.txt"), "b-main\n", Intent{Kind: IntentReplaceIfVersion, Version: b0}, ToolWriter("main")); err != nil {
		t.Fatal(err)
	}
	snap, err := ts.Snapshot("branch:x")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := snap.State("b.txt"); !st.Changed || st.Version != b0 {
		t.Errorf("snapshot b.txt = %+v, want changed from %s", st, b0)
	}
	if st, _ := snap.State("a.txt"); st.Changed {
		t.Errorf("snapshot a.txt = %+v, want unchanged", st)
	}
	changes := func() []BranchChange {
		return []BranchChange{{Key: "a.txt", Version: SumString("a-br\n"), Data: []byte("a-br\n")},
			{Key: "b.txt", Version: SumString("b-br\n"), Data: []byte("b-br\n")}}
	}
	res, err := ts.Merge(ctx, "x", "branch:x", changes(), MergeOptions{})
	if err != nil || !res.Refused || res.Conflicts != 1 || res.Applied != 0 {
		t.Fatalf("merge = %+v, %v; want refused with one conflict", res, err)
	}
	if got := ts.get("a.txt"); got != "a0\n" {
		t.Errorf("a.txt after a refused merge = %q", got)
	}
	partial := append(changes(), BranchChange{Key: "new/dir/c.txt", Version: SumString("c\n"), Data: []byte("c\n")})
	res, err = ts.Merge(ctx, "x", "branch:x", partial, MergeOptions{Partial: true})
	if err != nil || res.Applied != 2 || res.Step != "merge:x" {
		t.Fatalf("partial merge = %+v, %v", res, err)
	}
	if a, b, c := ts.get("a.txt"), ts.get("b.txt"), ts.get("new/dir/c.txt"); a != "a-br\n" || b != "b-main\n" || c != "c\n" {
		t.Errorf("after the partial merge: a.txt %q, b.txt %q, new/dir/c.txt %q", a, b, c)
	}
	ts.put("c.txt", "later\n")
	if _, err := ts.Rewind(ctx, "merge:x", RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := ts.version("a.txt"); v != a0 {
		t.Errorf("a.txt after rewinding the merge = %s, want %s", v, a0)
	}
	if c := ts.get("c.txt"); c != "later\n" {
		t.Errorf("c.txt after rewinding the merge = %q", c)
	}
}
