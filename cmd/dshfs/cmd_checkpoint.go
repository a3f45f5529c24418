package main

import (
	"fmt"
	"os"

	"github.com/dshfs/dshfs/internal/quote"
	"github.com/urfave/cli/v2"
)

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "record a checkpoint of the whole workspace",
		ArgsUsage: "[NAME]",
		Description: "Pins the version every file has now; `dshfs rewind NAME` brings them back. Without a name the\n" +
			"checkpoint is called cp-N. Every file counts, not only those dshfs has seen: the first checkpoint\n" +
			"reads the whole workspace and keeps every file's bytes (within --retain-bytes), drawing a\n" +
			"progress bar on a terminal; later ones look at each file and read only what changed.",
		Flags: []cli.Flag{mountFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return cli.Exit("checkpoint takes at most a name", exitUsage)
			}
			return runCheckpoint(c, c.Args().First())
		},
	}
}

// runCheckpoint records a checkpoint called name ("": cp-N).
func runCheckpoint(c *cli.Context, name string) error {
	client, err := clientFor(c, "")
	if err != nil {
		return err
	}
	bar := newProgressBar(os.Stderr, "checkpoint")
	cp, err := client.Checkpoint(c.Context, name, bar.update)
	bar.done()
	if err != nil {
		return daemonError(err)
	}
	fmt.Printf("checkpoint %s: %d files\n", quote.Name(cp.Name), cp.Files)
	return nil
}
