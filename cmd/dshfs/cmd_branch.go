package main

import (
	"fmt"
	"os"

	"github.com/dshfs/dshfs/internal/quote"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print the answer as JSON"}

func branchCommand() *cli.Command {
	return &cli.Command{
		Name:  "branch",
		Usage: "make, list, preview, merge and drop branches of the workspace (docs/branches.md)",
		Description: "A branch shows the workspace as it was when it was made and takes its own writes; it is mounted at\n" +
			"MOUNTPOINT@NAME by the workspace's daemon. `merge` applies the files the branch changed where the\n" +
			"workspace did not change them since (exit 1 and nothing applied on a conflict, unless --partial);\n" +
			"a repository's .git/ comes across by git's rules: new objects, and HEAD, refs and index as a\n" +
			"fast-forward, else the branch's commit as refs/dshfs/NAME. `dshfs rewind merge:NAME` undoes a merge alone.",
		Subcommands: []*cli.Command{
			{Name: "new", Usage: "make a branch and print its mount point", ArgsUsage: "NAME",
				Flags: []cli.Flag{mountFlag, &cli.StringFlag{Name: "actor", Usage: "the actor the branch is for"}, jsonFlag}, Action: runBranchNew},
			{Name: "list", Usage: "list the branches: actor, mount point, changed files, conflicts", Flags: []cli.Flag{mountFlag, jsonFlag}, Action: runBranchList},
			{Name: "diff", Usage: "preview a merge: each changed file with its three versions", ArgsUsage: "NAME", Flags: []cli.Flag{mountFlag, jsonFlag}, Action: runBranchDiff},
			{Name: "merge", Usage: "merge a branch into the workspace", ArgsUsage: "NAME",
				Flags: []cli.Flag{mountFlag, &cli.BoolFlag{Name: "partial", Usage: "apply the clean part despite conflicts"}, jsonFlag}, Action: runBranchMerge},
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
	res, err := client.BranchDiff(c.Context, name)
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
	res, err := client.MergeBranch(c.Context, name, c.Bool("partial"))
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
