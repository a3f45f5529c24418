package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/dshfs/dshfs/internal/quote"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print the answer as JSON"}

// The flags that shape a merge's plan, for diff and merge alike.
var (
	linesFlag   = &cli.BoolFlag{Name: "lines", Usage: "merge a text file changed on both sides where the changed lines are apart, by running git merge-file (git must be installed; op merge-lines); overlapping or touching changes stay conflicts"}
	ignoredFlag = &cli.BoolFlag{Name: "include-ignored", Usage: "merge the paths the workspace's .gitignore files ignore too (by default they stay in the branch, counted)"}
)

func mergeRequest(c *cli.Context) unixsocket.MergeRequest {
	return unixsocket.MergeRequest{Partial: c.Bool("partial"), Lines: c.Bool("lines"), IncludeIgnored: c.Bool("include-ignored")}
}

func branchCommand() *cli.Command {
	return &cli.Command{
		Name:  "branch",
		Usage: "make, list, preview, merge and drop branches of the workspace (docs/branches.md)",
		Description: "A branch shows the workspace as it was when it was made and takes its own writes; it is mounted at\n" +
			"MOUNTPOINT@NAME by the workspace's daemon. `merge` applies the files the branch changed where the\n" +
			"workspace did not change them since (exit 1 and nothing applied on a conflict, unless --partial);\n" +
			"a repository's .git/ comes across by git's rules: new objects, and HEAD, refs and index as a\n" +
			"fast-forward, else the branch's commit as refs/dshfs/NAME. --lines also merges a text file both\n" +
			"changed, where the changed lines are apart (git merge-file). Paths git ignores in the workspace\n" +
			"(node_modules/, build outputs) stay in the branch unless --include-ignored.\n" +
			"`dshfs rewind merge:NAME` undoes a merge alone.",
		Subcommands: []*cli.Command{
			{Name: "new", Usage: "make a branch and print its mount point", ArgsUsage: "NAME",
				Flags: []cli.Flag{mountFlag, &cli.StringFlag{Name: "actor", Usage: "the actor the branch is for"}, jsonFlag}, Action: runBranchNew},
			{Name: "list", Usage: "list the branches: actor, mount point, changed files, conflicts", Flags: []cli.Flag{mountFlag, jsonFlag}, Action: runBranchList},
			{Name: "diff", Usage: "preview a merge: each changed file with its three versions", ArgsUsage: "NAME",
				Flags: []cli.Flag{mountFlag, linesFlag, ignoredFlag, jsonFlag}, Action: runBranchDiff},
			{Name: "merge", Usage: "merge a branch into the workspace", ArgsUsage: "NAME",
				Flags: []cli.Flag{mountFlag, &cli.BoolFlag{Name: "partial", Usage: "apply the clean part despite conflicts"}, linesFlag, ignoredFlag, jsonFlag}, Action: runBranchMerge},
			{Name: "drop", Usage: "unmount and delete a branch", ArgsUsage: "NAME",
				Flags: []cli.Flag{mountFlag, &cli.BoolFlag{Name: "force", Usage: "even with files open for writing in it"}}, Action: runBranchDrop},
		},
	}
}

func oneName(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", cli.Exit(fmt.Sprintf("branch %s takes the name of one branch", c.Command.Name), exitUsage)
	}
	return c.Args().First(), nil
}

func runBranchNew(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	client, err := clientFor(c, "")
	if err != nil {
		return err
	}
	info, err := client.NewBranch(c.Context, name, c.String("actor"))
	if err != nil {
		return daemonError(err)
	}
	if c.Bool("json") {
		return printJSON(info)
	}
	fmt.Println(info.MountPoint)
	if info.Note != "" {
		fmt.Fprintln(os.Stderr, "dshfs: "+info.Note)
	}
	return nil
}

func runBranchList(c *cli.Context) error {
	client, err := clientFor(c, "")
	if err != nil {
		return err
	}
	list, err := client.Branches(c.Context)
	if err != nil {
		return daemonError(err)
	}
	if c.Bool("json") {
		return printJSON(list)
	}
	for _, b := range list {
		fmt.Printf("%s\t%s\tactor %s\t%d changed\t%d conflicts\n", quote.Name(b.Name), quote.Name(b.MountPoint), quote.Name(b.Actor), b.Changed, b.Conflicts)
	}
	return nil
}

func runBranchDiff(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	client, err := clientFor(c, "")
	if err != nil {
		return err
	}
	res, err := client.BranchDiffWith(c.Context, name, mergeRequest(c))
	if err != nil {
		return daemonError(err)
	}
	return printMerge(c, res)
}

func runBranchMerge(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	client, err := clientFor(c, "")
	if err != nil {
		return err
	}
	res, err := client.MergeBranchWith(c.Context, name, mergeRequest(c))
	if err != nil {
		return daemonError(err)
	}
	return printMerge(c, res)
}

// printMerge prints a merge's plan or result; conflicts are exit status 1.
func printMerge(c *cli.Context, res versionstore.MergeResult) error {
	if c.Bool("json") {
		if err := printJSON(res); err != nil {
			return err
		}
	} else {
		printMergeText(res)
	}
	if res.Conflicts > 0 {
		return cli.Exit("", exitToolError)
	}
	return nil
}

func printMergeText(res versionstore.MergeResult) {
	for _, it := range res.Items {
		switch {
		case it.Op == "same":
		case it.Conflict != "":
			fmt.Printf("conflict %s: %s (base %s, workspace %s, branch %s)\n", quote.Name(it.Path), it.Conflict, it.Base.Short(), it.Main.Short(), it.Branch.Short())
		default:
			fmt.Printf("%s %s\n", it.Op, quote.Name(it.Path))
		}
	}
	printMergeGit(res.Git)
	printIgnored(res.Ignored)
	switch {
	case res.Refused:
		fmt.Fprintf(os.Stderr, "dshfs: %d conflicts: nothing applied (--partial applies the rest)\n", res.Conflicts)
	case res.Step != "":
		fmt.Printf("merged %d files as %s (dshfs rewind %s undoes it)\n", res.Applied, res.Step, res.Step)
	}
}

// printMergeGit says how each of the branch's git repositories merges.
func printMergeGit(gits []versionstore.GitMerge) {
	for _, g := range gits {
		switch {
		case g.FastForward:
			fmt.Printf("git %s: fast-forward to %.12s\n", quote.Name(g.Repo), g.Commit)
		case g.Ref != "":
			fmt.Printf("git %s: not a fast-forward (%s): the branch's commit %.12s is %s, its changes uncommitted\n", quote.Name(g.Repo), g.Why, g.Commit, g.Ref)
		default:
			fmt.Printf("git %s: not a fast-forward (%s): HEAD, refs and index left alone\n", quote.Name(g.Repo), g.Why)
		}
	}
}

// printIgnored says which git-ignored files the merge left in the branch.
func printIgnored(ignored []versionstore.IgnoredPaths) {
	if len(ignored) == 0 {
		return
	}
	const shown = 8 // the JSON answer lists them all
	n, where := 0, make([]string, 0, shown+1)
	for i, g := range ignored {
		n += g.Files
		if i < shown {
			where = append(where, fmt.Sprintf("%s (%d)", quote.Name(g.Path), g.Files))
		}
	}
	if len(ignored) > shown {
		where = append(where, fmt.Sprintf("and %d more", len(ignored)-shown))
	}
	fmt.Printf("ignored %d git-ignored files, left in the branch: %s (--include-ignored merges them)\n", n, strings.Join(where, ", "))
}

func runBranchDrop(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	client, err := clientFor(c, "")
	if err != nil {
		return err
	}
	if err := client.DropBranch(c.Context, name, c.Bool("force")); err != nil {
		return daemonError(err)
	}
	fmt.Printf("dropped branch %s\n", quote.Name(name))
	return nil
}
