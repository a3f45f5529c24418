package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/dshfs/dshfs/internal/quote"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/urfave/cli/v2"
)

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "record a checkpoint of the whole workspace, or remove one (checkpoint rm NAME)",
		ArgsUsage: "[NAME] | rm NAME",
		Description: "Pins the version every file has now; `dshfs rewind NAME` brings them back. Without a name the\n" +
			"checkpoint is called cp-N. Every file counts, not only those dshfs has seen: the first checkpoint\n" +
			"reads the whole workspace and keeps every file's bytes (within --retain-bytes), drawing a\n" +
			"progress bar on a terminal; later ones look at each file and read only what changed.\n\n" +
			"`dshfs checkpoint rm NAME` removes a checkpoint (the versions it pinned stay in the history).",
		Flags: []cli.Flag{mountFlag},
		Action: func(c *cli.Context) error {
			switch {
			case c.Args().First() == "rm" && c.NArg() == 2:
				return runCheckpointRm(c, c.Args().Get(1))
			case c.Args().First() == "rm":
				return cli.Exit("checkpoint rm takes the name of one checkpoint (dshfs checkpoints lists them)", exitUsage)
			case c.NArg() > 1:
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
	if err := nameFree(c, client, name); err != nil {
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

// nameFree refuses, as a usage error, a name a checkpoint already has, and
// says how to free it. (The daemon refuses it too, in its own words, should
// the name be taken meanwhile.)
func nameFree(c *cli.Context, client *unixsocket.Client, name string) error {
	if name == "" {
		return nil
	}
	cps, err := client.Checkpoints(c.Context)
	if err != nil {
		return daemonError(err)
	}
	for _, cp := range cps {
		if cp.Name == name {
			return cli.Exit(fmt.Sprintf("checkpoint %s exists; pick another name, or remove it first: dshfs checkpoint rm %s",
				strconv.Quote(name), quote.Name(name)), exitUsage)
		}
	}
	return nil
}

// runCheckpointRm removes the checkpoint called name.
func runCheckpointRm(c *cli.Context, name string) error {
	client, err := clientFor(c, "")
	if err != nil {
		return err
	}
	if err := client.RemoveCheckpoint(c.Context, name); err != nil {
		return daemonError(err)
	}
	fmt.Printf("removed checkpoint %s\n", quote.Name(name))
	return nil
}
