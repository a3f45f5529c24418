package toolapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// fakeBranches has one branch, "a"; its merge plan is plan.
type fakeBranches struct {
	plan    versionstore.MergeResult
	partial bool // what the last merge asked
}

func (f *fakeBranches) List(context.Context) ([]Branch, error) {
	return []Branch{{Name: "a", Actor: "agent-a", Dir: "/mnt/ws@a", Changed: 3, Conflicts: 1}}, nil
}

func (f *fakeBranches) New(_ context.Context, name, actor string) (Branch, error) {
	if name == "a" {
		return Branch{}, fmt.Errorf("%w: branch %q exists", ErrBranchRefused, name)
	}
	return Branch{Name: name, Actor: actor, Dir: "/mnt/ws@" + name}, nil
}

func (f *fakeBranches) Diff(_ context.Context, name string) (versionstore.MergeResult, error) {
	if name != "a" {
		return versionstore.MergeResult{}, fmt.Errorf("%w: branch %q: no such branch", ErrBranchRefused, name)
	}
	return f.plan, nil
}

func (f *fakeBranches) Merge(ctx context.Context, name string, partial bool) (versionstore.MergeResult, error) {
	f.partial = partial
	res, err := f.Diff(ctx, name)
	if err != nil {
		return res, err
	}
	switch {
	case res.Conflicts > 0 && !partial:
		res.Refused = true
	default:
		res.Step = "merge:a"
		for i := range res.Items {
			if op := res.Items[i].Op; op == "write" || op == "remove" {
				res.Items[i].Applied = true
				res.Applied++
			}
		}
	}
	return res, nil
}

func mergePlan(conflict bool) versionstore.MergeResult {
	base, main, branch := versionstore.SumString("base"), versionstore.SumString("main"), versionstore.SumString("branch")
	res := versionstore.MergeResult{Items: []versionstore.MergeItem{
		{Path: "src/new.go", Op: "write", Branch: branch},
		{Path: "old.txt", Op: "remove", Base: base, Main: base},
	}}
	if conflict {
		res.Items = append(res.Items, versionstore.MergeItem{Path: "notes.md", Op: "conflict", Conflict: "modify/modify", Base: base, Main: main, Branch: branch})
		res.Conflicts = 1
	}
	return res
}

func callBranch(t *testing.T, b Branches, tool, args string) Result {
	t.Helper()
	r, err := CallBranchTool(context.Background(), b, tool, Request{Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	return r
}

// What the model reads of each branch tool: the branch, the plan with its
// three versions, a refused merge as an error naming the conflicts and
// applying nothing, a partial one saying what it left.
func TestBranchToolTexts(t *testing.T) {
	base, main, branch := versionstore.SumString("base").Short(), versionstore.SumString("main").Short(), versionstore.SumString("branch").Short()
	conflictLine := "conflict modify/modify: notes.md (base " + base + ", workspace " + main + ", branch " + branch + ")"
	for _, tc := range []struct {
		name, tool, args string
		conflict         bool
		isError          bool
		want             []string // lines, in order
	}{
		{"list", ToolBranchList, `{}`, false, false, []string{"1 branch:", "a: /mnt/ws@a (agent agent-a), 3 changed files, 1 conflict"}},
		{"diff", ToolBranchDiff, `{"name":"a"}`, true, false, []string{
			"Merging branch a: 1 to write, 1 to remove, 0 already the same, 1 conflict. A merge applies nothing unless partial is true.",
			"write src/new.go (base -, workspace -, branch " + branch + ")",
			"remove old.txt (base " + base + ", workspace " + base + ", branch -)",
			conflictLine}},
		{"merge", ToolBranchMerge, `{"name":"a"}`, false, false, []string{
			"Merged branch a: 2 files applied. Undo it with `dshfs rewind merge:a`.", "write src/new.go (applied)", "remove old.txt (applied)"}},
		{"merge refused", ToolBranchMerge, `{"name":"a"}`, true, true, []string{
			"Error: branch a has 1 conflict; nothing applied, the branch kept. Resolve them in the branch or the workspace and merge again, or merge with partial true to apply the rest.",
			conflictLine}},
		{"merge partial", ToolBranchMerge, `{"name":"a","partial":true}`, true, false, []string{
			"Merged part of branch a: 2 files applied, 1 conflict left in the branch. Undo it with `dshfs rewind merge:a`.",
			"write src/new.go (applied)", "remove old.txt (applied)", conflictLine}},
		{"new", ToolBranchNew, `{"name":"b","actor":"agent-b"}`, false, false, []string{
			"Created branch b at /mnt/ws@b. Start its agent in that directory; merge it with branch_merge."}},
		{"new, name taken", ToolBranchNew, `{"name":"a"}`, false, true, []string{`Error: branch "a" exists`}},
		{"no such branch", ToolBranchDiff, `{"name":"z"}`, false, true, []string{`Error: branch "z": no such branch`}},
		{"no name", ToolBranchMerge, `{}`, false, true, []string{`Error: invalid arguments: missing required property "name"`}},
		{"partial not a boolean", ToolBranchMerge, `{"name":"a","partial":"yes"}`, false, true, []string{`Error: invalid arguments: "partial" must be a boolean`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := callBranch(t, &fakeBranches{plan: mergePlan(tc.conflict)}, tc.tool, tc.args)
			if got := strings.Split(r.Text, "\n"); r.IsError != tc.isError || strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("%s %s: error %v, text\n%s\nwant error %v, text\n%s", tc.tool, tc.args, r.IsError, r.Text, tc.isError, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A branch tool's value is the daemon's answer, for programs that ask for
// structuredContent; a merge refused for conflicts carries its code.
func TestBranchToolValues(t *testing.T) {
	f := &fakeBranches{plan: mergePlan(true)}
	r := callBranch(t, f, ToolBranchMerge, `{"name":"a"}`)
	v, ok := r.Value.(versionstore.MergeResult)
	if !ok || !v.Refused || v.Applied != 0 || r.Error == nil || r.Error.Code != CodeMergeConflict || f.partial {
		t.Fatalf("refused merge: %+v, error %+v, partial asked %v", r.Value, r.Error, f.partial)
	}
	r = callBranch(t, f, ToolBranchList, `{}`)
	if list, ok := r.Value.([]Branch); !ok || len(list) != 1 || list[0].Dir != "/mnt/ws@a" {
		t.Fatalf("list value %+v", r.Value)
	}
}

// A daemon out of reach is the caller's error, not a text the tools make up.
func TestBranchToolUnreachable(t *testing.T) {
	down := errors.New("reach the dshfs daemon: connection refused")
	_, err := CallBranchTool(context.Background(), downBranches{down}, ToolBranchList, Request{Arguments: json.RawMessage(`{}`)})
	if !errors.Is(err, down) {
		t.Fatalf("err %v, want %v", err, down)
	}
	if _, err := CallBranchTool(context.Background(), downBranches{down}, "branch_drop", Request{}); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("branch_drop: %v, want ErrUnknownTool", err)
	}
}

type downBranches struct{ err error }

func (d downBranches) List(context.Context) ([]Branch, error)              { return nil, d.err }
func (d downBranches) New(context.Context, string, string) (Branch, error) { return Branch{}, d.err }
func (d downBranches) Diff(context.Context, string) (versionstore.MergeResult, error) {
	return versionstore.MergeResult{}, d.err
}
func (d downBranches) Merge(context.Context, string, bool) (versionstore.MergeResult, error) {
	return versionstore.MergeResult{}, d.err
}

// The branch tools' schemas are objects with their properties in order,
// the required ones listed, and their names are not the workspace tools'.
func TestBranchDefinitions(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Definitions(DefaultReadLimit) {
		seen[d.Name] = true
	}
	for _, d := range BranchDefinitions() {
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(d.InputSchema, &s); err != nil || s.Type != "object" || s.Properties == nil || s.Required == nil {
			t.Errorf("%s: schema %s (%v)", d.Name, d.InputSchema, err)
		}
		if seen[d.Name] || !IsBranchTool(d.Name) || d.Title == "" || d.Description == "" {
			t.Errorf("%s: a workspace tool's name %v, a branch tool %v, title %q", d.Name, seen[d.Name], IsBranchTool(d.Name), d.Title)
		}
		seen[d.Name] = true
	}
}
