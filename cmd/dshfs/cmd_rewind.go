package main

import (
	"fmt"
	"io"
	"os"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/urfave/cli/v2"
)

func rewindCommand() *cli.Command {
	var dryRun, asJSON bool
	var actor string
	return &cli.Command{
		Name:      "rewind",
		Usage:     "give every file changed since a checkpoint its version at the checkpoint",
		ArgsUsage: "CHECKPOINT",
		Description: "Restores changed files, recreates deleted ones and removes files created since — whoever\n" +
			"changed them: tools, shells, editors, git, or writes straight into the backing directory (recorded\n" +
			"first). A checkpoint is made first, so a rewind can be rewound. A file written during the rewind,\n" +
			"or whose bytes at the checkpoint are not kept, is reported as a conflict and left alone; the exit\n" +
			"status is then 1.",
		Flags: []cli.Flag{mountFlag,
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would change, change nothing", Destination: &dryRun},
			&cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &asJSON},
			&cli.StringFlag{Name: "actor", Usage: "who rewinds, for the history", Destination: &actor},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("rewind takes a checkpoint name (dshfs checkpoints lists them)", exitUsage)
			}
			client, err := clientFor(c, "")
			if err != nil {
				return err
			}
			bar := newProgressBar(os.Stderr, "rewind")
			res, err := client.Rewind(c.Context, unixsocket.RewindRequest{Checkpoint: c.Args().First(), DryRun: dryRun, Actor: actor}, bar.update)
			bar.done()
			if err != nil {
				return daemonError(err)
			}
			if asJSON {
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
		},
	}
}

func printRewind(w io.Writer, res unixsocket.RewindResult) {
	verbs := map[string][2]string{"restore": {"restored", "would restore"}, "recreate": {"recreated", "would recreate"}, "remove": {"removed", "would remove"}}
	for _, a := range res.Actions {
		if a.Error != "" {
			fmt.Fprintf(w, "conflict  %s: %s\n", a.Path, a.Error)
			continue
		}
		verb := verbs[a.Op][0]
		if res.DryRun {
			verb = verbs[a.Op][1]
		}
		fmt.Fprintf(w, "%-9s %s\n", verb, a.Path)
	}
	switch {
	case len(res.Actions) == 0:
		fmt.Fprintf(w, "nothing changed since %s\n", res.Checkpoint)
	case res.DryRun:
		fmt.Fprintf(w, "dry run: %d file(s) would change, %d conflict(s)\n", len(res.Actions)-res.Conflicts, res.Conflicts)
	default:
		fmt.Fprintf(w, "rewound to %s: %d file(s) changed, %d conflict(s); undo with: dshfs rewind %s\n",
			res.Checkpoint, len(res.Actions)-res.Conflicts, res.Conflicts, res.Before)
	}
}
