package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "show how a file changed between two versions, as a unified diff",
		ArgsUsage: "PATH [V1 [V2]]",
		Description: "With no version, the two newest versions are compared; with one, that version against the\n" +
			"newest. Versions as for show.",
		Flags: []cli.Flag{mountFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 || c.NArg() > 3 {
				return cli.Exit("diff takes PATH and up to two versions", exitUsage)
			}
			if err := checkVersions(c.Args().Get(1), c.Args().Get(2)); err != nil {
				return err
			}
			path := absPath(c.Args().Get(0))
			client, err := clientFor(c, path)
			if err != nil {
				return err
			}
			d, err := client.Diff(c.Context, "", path, c.Args().Get(1), c.Args().Get(2))
			if err != nil {
				return daemonError(err)
			}
			fmt.Print(d)
			return nil
		},
	}
}
