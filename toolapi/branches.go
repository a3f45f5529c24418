package toolapi

// The branch tools, for a model that orchestrates other agents, each on a
// branch of the workspace (docs/branches.md): list the branches, preview a
// branch's merge, merge it, and make a new one. They are served only when
// asked (`dshfs mcp --branch-tools`): an agent working in the workspace or
// in a branch has no use for them.
//
// There is no tool to drop a branch: a drop deletes the branch's files and
// their history, which no rewind brings back, so it is left to a person or
// to the harness that made the branch (docs/branches.md). A merge is not
// so: it applies only files the workspace did not change since the branch
// point, each under its lock by compare-and-swap, refuses the rest, and is
// undone alone by `dshfs rewind merge:NAME`.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// Branch tool names.
const (
	ToolBranchList  = "branch_list"
	ToolBranchDiff  = "branch_diff"
	ToolBranchMerge = "branch_merge"
	ToolBranchNew   = "branch_new"
)

// Branch is one branch as the branch tools show it.
type Branch struct {
	Name       string    `json:"name"`
	Actor      string    `json:"actor,omitempty"`
	Dir        string    `json:"dir"` // where the branch is mounted
	Checkpoint string    `json:"checkpoint"`
	Created    time.Time `json:"created"`
	Changed    int       `json:"changed"`
	Conflicts  int       `json:"conflicts"`
	Note       string    `json:"note,omitempty"`
}

// Branches is what the branch tools call: the workspace's daemon.
type Branches interface {
	List(ctx context.Context) ([]Branch, error)
	New(ctx context.Context, name, actor string) (Branch, error)
	Diff(ctx context.Context, name string) (versionstore.MergeResult, error)
	Merge(ctx context.Context, name string, partial bool) (versionstore.MergeResult, error)
}

var (
	branchNameProp   = property{"name", "string", "Name of the branch, as branch_list shows it.", true}
	branchListProps  = []property{}
	branchNameProps  = []property{branchNameProp}
	branchMergeProps = []property{branchNameProp,
		{"partial", "boolean", "Apply the files without a conflict even if others conflict. Defaults to false: a conflict applies nothing.", false}}
	branchNewProps = []property{
		{"name", "string", "Name of the new branch: letters, digits, '.', '_' and '-', at most 64.", true},
		{"actor", "string", "The agent the branch is for: its writes are attributed to it. Defaults to none.", false}}
)

// Merging into the workspace replaces files, but only those the workspace
// did not change since the branch point, and merging again applies nothing
// more: destructive and idempotent, as a guarded write.
var merges = Annotations{Destructive: true, Idempotent: true}

// BranchDefinitions are the branch tools.
func BranchDefinitions() []ToolDef {
	return []ToolDef{
		{ToolBranchList, "List the workspace's branches: each one's name, directory, agent, how many files it changed and how many of those the workspace changed too (conflicts).",
			schemaJSON(branchListProps), "List Branches", readOnly},
		{ToolBranchDiff, "Preview merging a branch into the workspace, changing nothing: each file the branch changed, what the merge would do with it (write, remove, same, or a conflict) and its versions at the branch point, in the workspace and in the branch.",
			schemaJSON(branchNameProps), "Preview Branch Merge", readOnly},
		{ToolBranchMerge, "Merge a branch into the workspace: apply each file the branch changed that the workspace did not change since the branch point. A file changed on both sides, or open for writing, is a conflict: then nothing is applied unless partial is true. The branch is kept; `dshfs rewind merge:NAME` undoes the merge alone.",
			schemaJSON(branchMergeProps), "Merge Branch", merges},
		{ToolBranchNew, "Make a branch: a private, writable directory showing the workspace as it is now, with nothing copied. Returns the directory: start an agent there, then merge the branch.",
			schemaJSON(branchNewProps), "New Branch", Annotations{}},
	}
}

// IsBranchTool says whether name is one of the branch tools.
func IsBranchTool(name string) bool {
	switch name {
	case ToolBranchList, ToolBranchDiff, ToolBranchMerge, ToolBranchNew:
		return true
	}
	return false
}

// CallBranchTool runs one branch tool call against b.
func CallBranchTool(ctx context.Context, b Branches, name string, req Request) (Result, error) {
	switch name {
	case ToolBranchList:
		return branchList(ctx, b, req)
	case ToolBranchDiff:
		return branchDiff(ctx, b, req)
	case ToolBranchMerge:
		return branchMerge(ctx, b, req)
	case ToolBranchNew:
		return branchNew(ctx, b, req)
	}
	return Result{}, fmt.Errorf("%w %q", ErrUnknownTool, name)
}

func branchList(ctx context.Context, b Branches, req Request) (Result, error) {
	if _, err := decodeArgs(req.Arguments, branchListProps); err != nil {
		return failure("list branches", err), nil
	}
	list, err := b.List(ctx)
	if err != nil {
		return branchFailure(err)
	}
	if list == nil {
		list = []Branch{}
	}
	return Result{Text: branchListText(list), Value: list}, nil
}

func branchDiff(ctx context.Context, b Branches, req Request) (Result, error) {
	a, err := decodeArgs(req.Arguments, branchNameProps)
	if err != nil {
		return failure("diff branch", err), nil
	}
	res, err := b.Diff(ctx, a.str("name"))
	if err != nil {
		return branchFailure(err)
	}
	return Result{Text: branchDiffText(a.str("name"), res), Value: res}, nil
}

func branchMerge(ctx context.Context, b Branches, req Request) (Result, error) {
	a, err := decodeArgs(req.Arguments, branchMergeProps)
	if err != nil {
		return failure("merge branch", err), nil
	}
	name := a.str("name")
	res, err := b.Merge(ctx, name, a.boolean("partial"))
	if err != nil {
		return branchFailure(err)
	}
	r := Result{Text: branchMergeText(name, res), Value: res}
	if res.Refused {
		r.IsError = true
		r.Error = &ErrorInfo{Code: CodeMergeConflict, Message: strings.TrimPrefix(r.Text, "Error: ")}
	}
	return r, nil
}

func branchNew(ctx context.Context, b Branches, req Request) (Result, error) {
	a, err := decodeArgs(req.Arguments, branchNewProps)
	if err == nil {
		err = CheckActor(a.str("actor"))
	}
	if err != nil {
		return failure("new branch", err), nil
	}
	br, err := b.New(ctx, a.str("name"), a.str("actor"))
	if err != nil {
		return branchFailure(err)
	}
	text := "Created branch " + br.Name + " at " + br.Dir + ". Start its agent in that directory; merge it with branch_merge."
	if br.Note != "" {
		text += "\nNote: " + br.Note + "."
	}
	return Result{Text: text, Value: br}, nil
}

// CodeMergeConflict is the code of a merge refused for its conflicts.
const CodeMergeConflict = "BRANCH_CONFLICT"

// ErrBranchRefused marks a branch request the daemon refused for what it
// asked (no such branch, a name taken): the model's to correct, said as
// the daemon says it.
var ErrBranchRefused = errors.New("branch request refused")

// branchFailure is a refusal as the model reads it; any other error (the
// daemon out of reach) goes to the caller as it is.
func branchFailure(err error) (Result, error) {
	if !errors.Is(err, ErrBranchRefused) {
		return Result{}, err
	}
	msg := strings.TrimSpace(strings.TrimPrefix(err.Error(), ErrBranchRefused.Error()+":"))
	return Result{Text: "Error: " + msg, IsError: true, Error: &ErrorInfo{Message: msg}}, nil
}

func branchListText(list []Branch) string {
	if len(list) == 0 {
		return "No branches. Make one with branch_new."
	}
	var b strings.Builder
	b.WriteString(plural(len(list), "branch", "branches") + ":")
	for _, br := range list {
		b.WriteString("\n" + br.Name + ": " + br.Dir)
		if br.Actor != "" {
			b.WriteString(" (agent " + br.Actor + ")")
		}
		b.WriteString(", " + plural(br.Changed, "changed file", "changed files") + ", " + plural(br.Conflicts, "conflict", "conflicts"))
	}
	return b.String()
}

// branchDiffText is a merge's plan: a count line, then one line a file.
func branchDiffText(name string, res versionstore.MergeResult) string {
	if len(res.Items) == 0 {
		return "Branch " + name + " changed no files: merging it does nothing."
	}
	ops := map[string]int{}
	for _, it := range res.Items {
		ops[it.Op]++
	}
	head := "Merging branch " + name + ": " + strconv.Itoa(ops["write"]) + " to write, " + strconv.Itoa(ops["remove"]) + " to remove, " +
		strconv.Itoa(ops["same"]) + " already the same, " + plural(res.Conflicts, "conflict", "conflicts") + "."
	if res.Conflicts > 0 {
		head += " A merge applies nothing unless partial is true."
	}
	return head + itemLines(res.Items, false)
}

func branchMergeText(name string, res versionstore.MergeResult) string {
	undo := " Undo it with `dshfs rewind " + res.Step + "`."
	switch {
	case res.Refused:
		return "Error: branch " + name + " has " + plural(res.Conflicts, "conflict", "conflicts") +
			"; nothing applied, the branch kept. Resolve them in the branch or the workspace and merge again, or merge with partial true to apply the rest." +
			itemLines(res.Items, true)
	case res.Applied == 0:
		return "Merged branch " + name + ": nothing to apply (every file it changed is the same in the workspace)." + itemLines(res.Items, true)
	case res.Conflicts > 0:
		return "Merged part of branch " + name + ": " + plural(res.Applied, "file", "files") + " applied, " +
			plural(res.Conflicts, "conflict", "conflicts") + " left in the branch." + undo + itemLines(res.Items, false)
	}
	return "Merged branch " + name + ": " + plural(res.Applied, "file", "files") + " applied." + undo + itemLines(res.Items, false)
}

// itemLines lists the merge's items, one a line; conflictsOnly lists only
// the conflicts.
func itemLines(items []versionstore.MergeItem, conflictsOnly bool) string {
	var b strings.Builder
	for _, it := range items {
		if conflictsOnly && it.Op != "conflict" {
			continue
		}
		b.WriteString("\n" + itemLine(it))
	}
	return b.String()
}

func itemLine(it versionstore.MergeItem) string {
	versions := " (base " + it.Base.Short() + ", workspace " + it.Main.Short() + ", branch " + it.Branch.Short() + ")"
	switch {
	case it.Op == "conflict":
		return "conflict " + it.Conflict + ": " + it.Path + versions
	case it.Applied:
		return it.Op + " " + it.Path + " (applied)"
	}
	return it.Op + " " + it.Path + versions
}

// plural is "no files", "1 file", "2 files".
func plural(n int, one, many string) string {
	switch n {
	case 0:
		return "no " + many
	case 1:
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
