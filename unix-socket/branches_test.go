package unixsocket

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// fakeBranches stands in for the daemon's branches: one, called "a", with
// a clean change and a conflict.
type fakeBranches struct{}

func (fakeBranches) New(name, actor string) (BranchInfo, error) {
	if name == "a" || name == "" {
		return BranchInfo{}, fmt.Errorf("%w %q exists", ErrBranchRefused, name)
	}
	return BranchInfo{Name: name, Actor: actor, MountPoint: "/mnt/ws@" + name, Checkpoint: "branch:" + name, Created: time.Unix(0, 0).UTC()}, nil
}

func (f fakeBranches) List() ([]BranchInfo, error) {
	b, _ := f.New("b", "agent")
	b.Name = "a"
	return []BranchInfo{b}, nil
}

func (fakeBranches) Drop(name string, force bool) error {
	if name != "a" {
		return fmt.Errorf("%w %q: no such branch", ErrBranchRefused, name)
	}
	return nil
}

func (fakeBranches) Merge(ctx context.Context, name string, o versionstore.MergeOptions) (versionstore.MergeResult, error) {
	if name != "a" {
		return versionstore.MergeResult{}, fmt.Errorf("%w %q: no such branch", ErrBranchRefused, name)
	}
	v := versionstore.SumString("x")
	items := []versionstore.MergeItem{{Path: "f.txt", Op: "write", Base: v, Main: v, Branch: versionstore.SumString("y"), Applied: !o.DryRun},
		{Path: "g.txt", Op: "conflict", Branch: v, Main: versionstore.SumString("z"), Conflict: versionstore.ConflictAddAdd}}
	res := versionstore.MergeResult{Step: "merge:a", Items: items, Conflicts: 1, Applied: 1}
	if o.Lines {
		res.Items = append(res.Items, versionstore.MergeItem{Path: "h.txt", Op: versionstore.OpMergeLines, Base: v,
			Main: versionstore.SumString("m"), Branch: versionstore.SumString("b"), Merged: versionstore.SumString("mb"), Applied: !o.DryRun})
	}
	if !o.IncludeIgnored {
		res.Ignored = []versionstore.IgnoredPaths{{Path: "node_modules/", Files: 3}}
	}
	return res, nil
}

// TestBranchMergeOptions: --lines and --include-ignored reach the daemon's
// merge, from a merge and from a diff.
func TestBranchMergeOptions(t *testing.T) {
	d := startDaemon(t, 0)
	ctx := context.Background()
	check := func(what string, res versionstore.MergeResult, err error, lines, ignored bool) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := len(res.Items) == 3 && res.Items[2].Op == versionstore.OpMergeLines && !res.Items[2].Merged.IsZero(); got != lines {
			t.Errorf("%s: a line merge %v, want %v (%+v)", what, got, lines, res.Items)
		}
		if got := len(res.Ignored) == 1 && res.Ignored[0].Files == 3; got != ignored {
			t.Errorf("%s: ignored paths listed %v, want %v", what, got, ignored)
		}
	}
	res, err := d.client.MergeBranchWith(ctx, "a", MergeRequest{Lines: true})
	check("merge --lines", res, err, true, true)
	res, err = d.client.MergeBranchWith(ctx, "a", MergeRequest{IncludeIgnored: true})
	check("merge --include-ignored", res, err, false, false)
	res, err = d.client.BranchDiffWith(ctx, "a", MergeRequest{Lines: true, IncludeIgnored: true})
	check("diff --lines --include-ignored", res, err, true, false)
	res, err = d.client.BranchDiff(ctx, "a")
	check("diff", res, err, false, true)
}

// branches: the branch routes, and their refusals.
func (c *conformance) branches() {
	c.get("/v1/branches", 200)
	c.post("/v1/branches", `{"name":"b","actor":"agent"}`, 200)
	c.post("/v1/branches", `{"name":"a"}`, 409)
	c.post("/v1/branches", `{"name":"b","actor":"a\u0000"}`, 400, bad)
	c.post("/v1/branches", `{"name":`, 400, bad)
	c.send(exchange{method: "DELETE", target: "/v1/branches/a", code: 200}, nil)
	c.send(exchange{method: "DELETE", target: "/v1/branches/zz", code: 409}, nil)
	c.get("/v1/branches/a/diff", 200)
	c.get("/v1/branches/a/diff?lines=true&include_ignored=true", 200)
	c.post("/v1/branches/a/merge", `{"lines":true,"include_ignored":true}`, 200)
	c.get("/v1/branches/zz/diff", 409)
	c.post("/v1/branches/a/merge", `{"partial":true}`, 200)
	c.post("/v1/branches/zz/merge", `{}`, 409)
	c.post("/v1/branches/a/merge", `{"partial":`, 400, bad)
	c.do(c.bare, exchange{method: "GET", target: "/v1/branches", code: 404})
	c.do(c.bare, exchange{method: "POST", target: "/v1/branches", body: `{"name":"b"}`, code: 404})
	c.do(c.bare, exchange{method: "DELETE", target: "/v1/branches/a", code: 404})
	c.do(c.bare, exchange{method: "GET", target: "/v1/branches/a/diff", code: 404})
	c.do(c.bare, exchange{method: "POST", target: "/v1/branches/a/merge", body: `{}`, code: 404})
}
