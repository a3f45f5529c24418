package main

import (
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print a file's bytes at one of its versions",
		ArgsUsage: "PATH@VERSION",
		Description: "VERSION is b3:<hex> or at least 4 hex digits of a version in the file's history (dshfs log\n" +
			"lists them). The bytes are checked against the version before they are printed.",
		Flags: []cli.Flag{mountFlag},
		Action: func(c *cli.Context) error {
			arg := c.Args().First()
			i := strings.LastIndex(arg, "@")
			if c.NArg() != 1 || i <= 0 || i == len(arg)-1 {
				return cli.Exit("show takes PATH@VERSION, e.g. show main.go@b3:1f2e3d4c", exitUsage)
			}
			return runShow(c, arg[:i], arg[i+1:])
		},
	}
}

// runShow prints the bytes of the file at path at version.
func runShow(c *cli.Context, path, version string) error {
	client, path, err := fileClient(c, path, version)
	if err != nil {
		return err
	}
	data, err := client.Show(c.Context, "", path, version)
	if err != nil {
		return daemonError(err)
	}
	_, err = os.Stdout.Write(data)
	return err
}
