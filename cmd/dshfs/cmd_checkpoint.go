package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "record a checkpoint of the whole workspace (cheap: nothing is copied)",
		ArgsUsage: "[NAME]",
		Description: "Pins the version every file has now; `dshfs rewind NAME` brings them back. Without a name the\n" +
			"checkpoint is called cp-N.",
		Flags: []cli.Flag{mountFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return cli.Exit("checkpoint takes at most a name", exitUsage)
			}
			client, err := clientFor(c, "")
			if err != nil {
				return err
			}
			cp, err := client.Checkpoint(c.Context, c.Args().First())
			if err != nil {
				return daemonError(err)
			}
			fmt.Printf("checkpoint %s: %d files\n", cp.Name, cp.Files)
			return nil
		},
	}
}
