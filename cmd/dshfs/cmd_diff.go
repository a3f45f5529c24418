package main

import (
	"fmt"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/urfave/cli/v2"
)

func diffCommand() *cli.Command {
	var since string
	var exclude cli.StringSlice
	var git bool
	var remoteURL string
	return &cli.Command{
		Name:      "diff",
		Usage:     "show, as a unified diff, how a file changed between two versions, or everything changed since a checkpoint",
		ArgsUsage: "PATH [V1 [V2]] | --since CHECKPOINT [PATH...]",
		Description: "With a path and no version, the newest version against the content it replaced (an editor's\n" +
			"rename-over save is a change of content, not a new file); with one version, that version against\n" +
			"the newest; with two, the two. Versions as for show.\n\n" +
			"With --since (a checkpoint's name, a time or a duration), one diff of every file changed since —\n" +
			"edits, creations, deletions, renames, writes straight into the backing directory — in path order,\n" +
			"paths relative to the workspace (a/ before, b/ after); paths limit it. Binary files and files\n" +
			"whose bytes are not kept are named, not shown. The headers are git's: git apply and patch -p1 take\n" +
			"the diff (-R undoes the session). git's own files (.git/) are left out unless --git; --exclude\n" +
			"leaves out what a pattern matches, as rewind takes it.",
		Flags: []cli.Flag{mountFlag, remoteFlagTo(&remoteURL),
			&cli.StringFlag{Name: "since", Usage: "diff the workspace's changes since a checkpoint, a time or a duration ago", Destination: &since},
			&cli.StringSliceFlag{Name: "exclude", Usage: "with --since, leave out what this pattern matches (repeatable)", Destination: &exclude},
			&cli.BoolFlag{Name: "git", Usage: "with --since, include git's own files (.git/)", Destination: &git},
		},
		Action: func(c *cli.Context) error {
			if since != "" {
				q := toolapi.SessionQuery{Since: since, Exclude: exclude.Value(), Git: git}
				if remoteURL != "" {
					q.Paths = c.Args().Slice()
					return runRemoteDiff(c, remoteURL, q)
				}
				return runSessionDiff(c, q, cliPaths(c, c.Args().Slice()))
			}
			if remoteURL != "" {
				return cli.Exit("diff --remote takes --since CHECKPOINT", exitUsage)
			}
			if c.NArg() < 1 || c.NArg() > 3 {
				return cli.Exit("diff takes PATH and up to two versions, or --since CHECKPOINT and paths", exitUsage)
			}
			return runDiff(c, c.Args().Get(0), c.Args().Get(1), c.Args().Get(2))
		},
	}
}

// runDiff prints how the file at path changed between versions v1 and v2
// (either may be "").
func runDiff(c *cli.Context, path, v1, v2 string) error {
	client, path, err := fileClient(c, path, v1, v2)
	if err != nil {
		return err
	}
	return printDiff(client.Diff(c.Context, "", path, v1, v2))
}

// runSessionDiff prints one diff of the workspace's changes q selects.
func runSessionDiff(c *cli.Context, q toolapi.SessionQuery, paths []string) error {
	client, err := clientForPaths(c, paths)
	if err != nil {
		return err
	}
	q.Paths = paths
	return printDiff(client.SessionDiff(c.Context, q))
}

func printDiff(d string, err error) error {
	if err != nil {
		return daemonError(err)
	}
	fmt.Print(d)
	return nil
}
