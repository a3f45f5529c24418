package versionstore

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
)

// fakeLineMerge merges versions with the same number of lines, line by
// line: a line changed on one side takes that side's, one changed alike on
// both sides is taken once, one changed differently is a conflict. A
// version holding "fail" is an error, one holding "long" ErrMergedTooLong,
// one holding "huge" a clean merge longer than MergeLinesMax.
// It records what it was given.
type fakeLineMerge struct{ calls [][3]string }

var errFakeMerge = errors.New("the line merge failed")

func (f *fakeLineMerge) merge(ctx context.Context, base, main, branch []byte) ([]byte, bool, error) {
	f.calls = append(f.calls, [3]string{string(base), string(main), string(branch)})
	all := string(base) + string(main) + string(branch)
	switch {
	case strings.Contains(all, "fail"):
		return nil, false, errFakeMerge
	case strings.Contains(all, "long"):
		return nil, false, ErrMergedTooLong
	case strings.Contains(all, "huge"):
		return make([]byte, MergeLinesMax+1), true, nil
	}
	b, m, r := strings.SplitAfter(string(base), "\n"), strings.SplitAfter(string(main), "\n"), strings.SplitAfter(string(branch), "\n")
	if len(m) != len(b) || len(r) != len(b) {
		return nil, false, nil
	}
	var out strings.Builder
	for i := range b {
		switch {
		case m[i] == b[i] || m[i] == r[i]:
			out.WriteString(r[i])
		case r[i] == b[i]:
			out.WriteString(m[i])
		default:
			return []byte("<<<<<<< conflict\n"), false, nil
		}
	}
	return []byte(out.String()), true, nil
}

// TestMergeLinesVerdicts: each answer of the line merge, and what the
// merge makes of it, for a file the workspace and the branch both changed
// from "1\n2\n3\n".
func TestMergeLinesVerdicts(t *testing.T) {
	const base = "1\n2\n3\n"
	tests := []struct {
		name, main, branch string
		op, conflict       string
		want               string // the workspace's file after the merge
		err                error
		merged             bool // the line merge was asked
	}{
		{"lines apart", "one\n2\n3\n", "1\n2\nthree\n", OpMergeLines, "", "one\n2\nthree\n", nil, true},
		{"the same line", "1\ntwo\n3\n", "1\nTWO\n3\n", "conflict", conflictLinesOverlap, "1\ntwo\n3\n", nil, true},
		{"the branch's change already made", "one\n2\nthree\n", "1\n2\nthree\n", "same", "", "one\n2\nthree\n", nil, true},
		{"not text", "1\n2\x00\n3\n", "1\n2\nthree\n", "conflict", conflictNotText, "1\n2\x00\n3\n", nil, false},
		{"not UTF-8", "one\n2\n3\n", "1\n2\n\xff\n", "conflict", conflictNotText, "one\n2\n3\n", nil, false},
		{"merged too long", "long\n2\n3\n", "1\n2\nthree\n", "conflict", conflictLinesTooLong, "long\n2\n3\n", nil, true},
		{"merged longer than the bound", "huge\n2\n3\n", "1\n2\nthree\n", "conflict", conflictLinesTooLong, "huge\n2\n3\n", nil, true},
		{"the line merge fails", "fail\n2\n3\n", "1\n2\nthree\n", "conflict", ConflictModify, "fail\n2\n3\n", errFakeMerge, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := openTestStore(t)
			ctx := context.Background()
			ts.put("f.txt", base)
			if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
				t.Fatal(err)
			}
			if _, err := ts.WriteText(ctx, ts.target("f.txt"), tt.main, Intent{}, ToolWriter("main")); err != nil {
				t.Fatal(err)
			}
			fake := &fakeLineMerge{}
			change := BranchChange{Key: "f.txt", Version: SumString(tt.branch), Data: []byte(tt.branch)}
			res, err := ts.Merge(ctx, "x", "branch:x", []BranchChange{change}, MergeOptions{Lines: true, LineMerge: fake.merge})
			if !errors.Is(err, tt.err) || len(res.Items) != 1 {
				t.Fatalf("merge = %+v, %v; want error %v", res, err, tt.err)
			}
			it := res.Items[0]
			if it.Op != tt.op || it.Conflict != tt.conflict {
				t.Errorf("item %+v; want op %q, conflict %q", it, tt.op, tt.conflict)
			}
			if got := ts.get("f.txt"); got != tt.want {
				t.Errorf("f.txt after the merge = %q, want %q", got, tt.want)
			}
			if want := [3]string{base, tt.main, tt.branch}; tt.merged != (len(fake.calls) == 1 && fake.calls[0] == want) {
				t.Errorf("the line merge was given %q; want %v", fake.calls, tt.merged)
			}
			if tt.op == OpMergeLines && (!it.Applied || it.Merged != SumString(tt.want) || res.Applied != 1) {
				t.Errorf("merge-lines item %+v, %d applied; want it applied with merged %s", it, res.Applied, SumString(tt.want).Short())
			}
		})
	}
}

// TestMergeLines: a file changed on both sides at lines apart is merged
// line by line with Lines (and only with it), written as the merge's step;
// one changed on both sides at the same line, or not text, stays a
// conflict and nothing of the merge is applied.
func TestMergeLines(t *testing.T) {
	ts := openTestStore(t)
	ctx := context.Background()
	base := "1\n2\n3\n4\n5\n6\n"
	ts.put("f.txt", base)
	ts.put("g.txt", base)
	ts.put("bin", "a\x00b\n")
	if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
		t.Fatal(err)
	}
	write := func(key, data string) {
		t.Helper()
		if _, err := ts.WriteText(ctx, ts.target(key), data, Intent{}, ToolWriter("main")); err != nil {
			t.Fatal(err)
		}
	}
	write("f.txt", strings.Replace(base, "1\n", "one\n", 1))
	write("g.txt", strings.Replace(base, "3\n", "three\n", 1))
	write("bin", "a\x00B\n")
	change := func(key, data string) BranchChange {
		return BranchChange{Key: key, Version: SumString(data), Data: []byte(data)}
	}
	f := change("f.txt", strings.Replace(base, "6\n", "six\n", 1))
	g := change("g.txt", strings.Replace(base, "3\n", "THREE\n", 1))
	bin := change("bin", "A\x00b\n")
	fake := &fakeLineMerge{}
	lines := MergeOptions{Lines: true, LineMerge: fake.merge}

	res, err := ts.Merge(ctx, "x", "branch:x", []BranchChange{f}, MergeOptions{LineMerge: fake.merge})
	if err != nil || !res.Refused || res.Items[0].Conflict != ConflictModify || len(fake.calls) != 0 {
		t.Fatalf("merge without Lines = %+v, %v (line merges %d); want a modify/modify conflict", res, err, len(fake.calls))
	}
	res, err = ts.Merge(ctx, "x", "branch:x", []BranchChange{f, g, bin}, lines)
	if err != nil || !res.Refused || res.Conflicts != 2 || res.Applied != 0 {
		t.Fatalf("merge with an overlap = %+v, %v; want refused with two conflicts", res, err)
	}
	want := map[string]string{"bin": conflictNotText, "f.txt": "", "g.txt": conflictLinesOverlap}
	for _, it := range res.Items {
		if it.Conflict != want[it.Path] {
			t.Errorf("%s: conflict %q, want %q", it.Path, it.Conflict, want[it.Path])
		}
	}
	if got := ts.get("f.txt"); got != "one\n2\n3\n4\n5\n6\n" {
		t.Errorf("f.txt after a refused merge = %q", got)
	}
	dry := lines
	dry.DryRun = true
	res, err = ts.Merge(ctx, "x", "branch:x", []BranchChange{f}, dry)
	if err != nil || res.Applied != 0 || res.Items[0].Op != OpMergeLines || ts.get("f.txt") != "one\n2\n3\n4\n5\n6\n" {
		t.Fatalf("line merge's plan = %+v, %v; want merge-lines, nothing applied", res, err)
	}
	res, err = ts.Merge(ctx, "x", "branch:x", []BranchChange{f}, lines)
	if err != nil || res.Applied != 1 || res.Items[0].Op != OpMergeLines {
		t.Fatalf("line merge = %+v, %v", res, err)
	}
	merged := "one\n2\n3\n4\n5\nsix\n"
	if got := ts.get("f.txt"); got != merged || res.Items[0].Merged != SumString(merged) {
		t.Errorf("f.txt after the line merge = %q (item %+v), want %q", got, res.Items[0], merged)
	}
	res, err = ts.Merge(ctx, "x", "branch:x", []BranchChange{f}, lines)
	if err != nil || res.Applied != 0 || res.Items[0].Op != "same" {
		t.Errorf("the line merge again = %+v, %v; want same", res, err)
	}
	if _, err := ts.Rewind(ctx, "merge:x", RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := ts.get("f.txt"); got != "one\n2\n3\n4\n5\n6\n" {
		t.Errorf("f.txt after rewinding the line merge = %q", got)
	}
}

// TestMergeLinesWithoutLineMerge: Lines with no LineMerge is the caller's
// mistake, an error, not a silent merge without it.
func TestMergeLinesWithoutLineMerge(t *testing.T) {
	ts := openTestStore(t)
	ctx := context.Background()
	ts.put("f.txt", "1\n2\n")
	if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.WriteText(ctx, ts.target("f.txt"), "one\n2\n", Intent{}, ToolWriter("main")); err != nil {
		t.Fatal(err)
	}
	change := BranchChange{Key: "f.txt", Version: SumString("1\ntwo\n"), Data: []byte("1\ntwo\n")}
	if res, err := ts.Merge(ctx, "x", "branch:x", []BranchChange{change}, MergeOptions{Lines: true}); err == nil {
		t.Errorf("merge with Lines and no LineMerge = %+v; want an error", res)
	}
	if got := ts.get("f.txt"); got != "one\n2\n" {
		t.Errorf("f.txt = %q", got)
	}
}

// TestMergeLinesCompareAndSwap: a line merge is applied only over the
// workspace's version the plan saw; a file changed after the plan is
// refused, and the merge's other changes taken back (or, with Partial,
// kept).
func TestMergeLinesCompareAndSwap(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "partial"}[partial], func(t *testing.T) {
			ctx := context.Background()
			fired := false
			late := "late\n2\n3\n4\n5\n6\n"
			ts := openTestStore(t)
			base := "1\n2\n3\n4\n5\n6\n"
			ts.put("a.txt", "a0\n")
			ts.put("b.txt", base)
			if _, err := ts.MarkCheckpoint("branch:x"); err != nil {
				t.Fatal(err)
			}
			if _, err := ts.WriteText(ctx, ts.target("b.txt"), "one\n2\n3\n4\n5\n6\n", Intent{}, ToolWriter("main")); err != nil {
				t.Fatal(err)
			}
			b := "1\n2\n3\n4\n5\nsix\n"
			changes := []BranchChange{{Key: "a.txt", Version: SumString("a1\n"), Data: []byte("a1\n")},
				{Key: "b.txt", Version: SumString(b), Data: []byte(b)}}
			fake := &fakeLineMerge{}
			// At the merge's first publish (the files are applied at once,
			// in any order), b.txt changes behind the store: its publish,
			// first or not, is checked again after this and refused.
			var once sync.Once
			ts.beforePublish = func() {
				once.Do(func() {
					fired = true
					if err := os.WriteFile(ts.path("b.txt"), []byte(late), 0o644); err != nil {
						t.Error(err)
					}
				})
			}
			res, err := ts.Merge(ctx, "x", "branch:x", changes, MergeOptions{Lines: true, LineMerge: fake.merge, Partial: partial})
			ts.beforePublish = nil
			if err != nil || !fired || res.Conflicts != 1 || res.Items[1].Conflict == "" || len(fake.calls) != 1 {
				t.Fatalf("merge = %+v, %v (the late write ran: %v); want b.txt refused", res, err, fired)
			}
			wantA := map[bool]string{false: "a0\n", true: "a1\n"}[partial]
			if a, got := ts.get("a.txt"), ts.get("b.txt"); a != wantA || got != late {
				t.Errorf("after the merge: a.txt %q, b.txt %q; want %q, %q", a, got, wantA, late)
			}
		})
	}
}
