package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dshfs/dshfs/internal/quote"
	"github.com/urfave/cli/v2"
)

func showCommand() *cli.Command {
	var remoteURL string
	return &cli.Command{
		Name:      "show",
		Usage:     "print a file's bytes at one of its versions, or now",
		ArgsUsage: "PATH[@VERSION]",
		Description: "VERSION is b3:<hex> or at least 4 hex digits of a version in the file's history (dshfs log\n" +
			"lists them). The bytes are checked against the version before they are printed. Without a\n" +
			"version, the file's bytes now.",
		Flags: []cli.Flag{mountFlag, remoteFlagTo(&remoteURL)},
		Action: func(c *cli.Context) error {
			arg := c.Args().First()
			if c.NArg() != 1 || arg == "" {
				return cli.Exit("show takes PATH or PATH@VERSION, e.g. show main.go@b3:1f2e3d4c", exitUsage)
			}
			i := strings.LastIndex(arg, "@")
			switch {
			case i < 0:
				return runShowNow(c, arg)
			case i == 0 || i == len(arg)-1:
				return cli.Exit("show takes PATH or PATH@VERSION, e.g. show main.go@b3:1f2e3d4c", exitUsage)
			}
			if remoteURL != "" {
				if i < 0 {
					return cli.Exit("show --remote takes PATH@VERSION, with PATH relative to the workspace", exitUsage)
				}
				return runRemoteShow(c, remoteURL, arg[:i], arg[i+1:])
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

// runShowNow prints the bytes the file at path holds now, read as any
// reader of the mount reads them.
func runShowNow(c *cli.Context, path string) error {
	_, path, err := fileClient(c, path)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return cli.Exit(fmt.Sprintf("cannot show %s: %v", quote.Name(path), errors.Unwrap(err)), exitNotFound)
	}
	defer f.Close()
	_, err = io.Copy(os.Stdout, f)
	return err
}
