package main

import (
	"fmt"
	"io"
	"os"

	"github.com/dshfs/dshfs/internal/quote"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

// rewindOptions are the flags of `dshfs rewind`.
type rewindOptions struct {
	DryRun, JSON, Partial bool
	Actor, As             string
	Exclude               cli.StringSlice
}

func rewindCommand() *cli.Command {
	var o rewindOptions
	return &cli.Command{
		Name:      "rewind",
		Usage:     "give every file changed since a checkpoint its version at the checkpoint",
		ArgsUsage: "CHECKPOINT [PATH...]",
		Description: "Restores changed files, recreates deleted ones and removes files created since — whoever\n" +
			"changed them: tools, shells, editors, git, or writes straight into the backing directory (the\n" +
			"workspace is looked over first). Paths limit it to themselves and what is below them; --exclude\n" +
			"leaves out what a pattern matches (without a slash, any path element: .git, *.log; with one, a\n" +
			"path from the workspace's root: build/out). Changes to a git repository's own files (.git/) are\n" +
			"listed apart: rewinding them undoes the commits, branch moves and staging made since.\n\n" +
			"A checkpoint is made first, so a rewind can be rewound. A file written during the rewind, or whose\n" +
			"bytes at the checkpoint are not kept, is reported as a conflict and left alone; the exit status\n" +
			"is then 1.\n\n" +
			"--actor A undoes only the changes attributed to actor A since the checkpoint: its tool calls, the\n" +
			"writes of the shells its harness ran (the processes registered for A and their children), restores\n" +
			"run as A; every other writer's changes stay. A file someone else changed after A did is a conflict,\n" +
			"shown with its three versions (before A, A's, now) and left alone; a conflict changes nothing at\n" +
			"all unless --partial, which changes the other files.",
		Flags: []cli.Flag{mountFlag,
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would change, change nothing", Destination: &o.DryRun},
			&cli.StringSliceFlag{Name: "exclude", Usage: "leave out what this pattern matches (repeatable)", Destination: &o.Exclude},
			&cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &o.JSON},
			&cli.StringFlag{Name: "actor", Usage: "undo only this actor's changes (its tool calls and its shells' writes)", Destination: &o.Actor},
			&cli.BoolFlag{Name: "partial", Usage: "with --actor: change what does not conflict, leave the conflicts", Destination: &o.Partial},
			&cli.StringFlag{Name: "as", Usage: "who rewinds, for the history", DefaultText: "your user name", Destination: &o.As},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 {
				return cli.Exit("rewind takes a checkpoint name (dshfs checkpoints lists them) and paths", exitUsage)
			}
			return runRewind(c, o, c.Args().First(), cliPaths(c, c.Args().Tail()))
		},
	}
}

// runRewind rewinds paths (none: the whole workspace) to checkpoint, and
// says what it did; a conflict is exit status 1.
func runRewind(c *cli.Context, o rewindOptions, checkpoint string, paths []string) error {
	if o.Partial && o.Actor == "" {
		return cli.Exit("--partial goes with --actor: a rewind of everyone's changes always changes what does not conflict", exitUsage)
	}
	client, err := clientForPaths(c, paths)
	if err != nil {
		return err
	}
	bar := newProgressBar(os.Stderr, "rewind")
	res, err := client.Rewind(c.Context, unixsocket.RewindRequest{Checkpoint: checkpoint, DryRun: o.DryRun,
		Actor: actorOrUser(o.As), Paths: paths, Exclude: o.Exclude.Value(), OnlyActor: o.Actor, Partial: o.Partial}, bar.update)
	bar.done()
	if err != nil {
		return daemonError(err)
	}
	if o.JSON {
		if err := printJSON(res); err != nil {
			return err
		}
	} else {
		printRewind(os.Stdout, res)
	}
	if res.Conflicts > 0 {
		return cli.Exit("", exitToolError)
	}
	return nil
}

// printRewind says what a rewind did or would do, a git repository's own
// files apart.
func printRewind(w io.Writer, res unixsocket.RewindResult) {
	work, git := splitGit(res.Actions)
	wouldBe := res.DryRun || res.Refused
	printActions(w, work, res.Actor, wouldBe)
	if len(git) > 0 {
		fmt.Fprintf(w, "\nin .git/ (%d): git's own files; rewinding them undoes the commits, branch moves and staging made since %s.\n",
			len(git), quote.Name(res.Checkpoint))
		if res.DryRun {
			fmt.Fprintln(w, "To leave the repository as it is, add --exclude .git.")
		}
		printActions(w, git, res.Actor, wouldBe)
	}
	switch {
	case len(res.Actions) == 0 && res.Actor != "":
		fmt.Fprintf(w, "%s changed nothing since %s\n", quote.Name(res.Actor), quote.Name(res.Checkpoint))
	case len(res.Actions) == 0:
		fmt.Fprintf(w, "nothing changed since %s\n", quote.Name(res.Checkpoint))
	case res.Refused:
		fmt.Fprintf(w, "refused: %d conflict(s), nothing changed; --partial changes the other %d file(s) and leaves the conflicts\n",
			res.Conflicts, len(res.Actions)-res.Conflicts)
	case res.DryRun:
		fmt.Fprintf(w, "dry run: %d file(s) would change, %d conflict(s)\n", len(res.Actions)-res.Conflicts, res.Conflicts)
	case res.Actor != "":
		fmt.Fprintf(w, "rewound %s's changes since %s: %d file(s) changed, %d conflict(s); undo with: dshfs rewind %s\n",
			quote.Name(res.Actor), quote.Name(res.Checkpoint), len(res.Actions)-res.Conflicts, res.Conflicts, quote.Name(res.Before))
	default:
		fmt.Fprintf(w, "rewound to %s: %d file(s) changed, %d conflict(s); undo with: dshfs rewind %s\n",
			quote.Name(res.Checkpoint), len(res.Actions)-res.Conflicts, res.Conflicts, quote.Name(res.Before))
	}
}

// splitGit separates the actions on a git repository's own files from the
// others.
func splitGit(actions []unixsocket.RewindAction) (work, git []unixsocket.RewindAction) {
	for _, a := range actions {
		if a.InGit {
			git = append(git, a)
		} else {
			work = append(work, a)
		}
	}
	return work, git
}

func printActions(w io.Writer, actions []unixsocket.RewindAction, actor string, dryRun bool) {
	verbs := map[string][2]string{"restore": {"restored", "would restore"}, "recreate": {"recreated", "would recreate"}, "remove": {"removed", "would remove"}}
	for _, a := range actions {
		if a.Error != "" {
			fmt.Fprintf(w, "conflict  %s: %s\n", quote.Name(a.Path), quote.Text(a.Error))
			if a.ChangedBy != nil {
				fmt.Fprintf(w, "          before %[2]s %[1]s, %[2]s's %[3]s, now %[4]s; changed by %[5]s\n", shortOrNone(a.To), quote.Name(actor),
					shortOrNone(a.ActorVersion), shortOrNone(a.From), describeWriter(*a.ChangedBy))
			}
			continue
		}
		verb := verbs[a.Op][0]
		if dryRun {
			verb = verbs[a.Op][1]
		}
		fmt.Fprintf(w, "%-9s %s\n", verb, quote.Name(a.Path))
	}
}

// shortOrNone is v's short form, or "none" where there was no file.
func shortOrNone(v versionstore.Version) string {
	if v.IsZero() {
		return "none"
	}
	return v.Short()
}
