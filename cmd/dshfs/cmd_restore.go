package main

import (
	"fmt"

	"github.com/dshfs/dshfs/internal/quote"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

func restoreCommand() *cli.Command {
	var actor string
	return &cli.Command{
		Name:      "restore",
		Usage:     "make a version of a file its content again (recorded as a restore, itself undoable)",
		ArgsUsage: "PATH VERSION",
		Description: "A guarded write: refused while a process is writing the file through the mount. The bytes the\n" +
			"file had are kept, so `dshfs restore PATH <the version it had>` undoes it.",
		Flags: []cli.Flag{mountFlag, &cli.StringFlag{Name: "actor", Usage: "who restores, for the history", DefaultText: "your user name", Destination: &actor}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("restore takes PATH and VERSION", exitUsage)
			}
			return runRestore(c, c.Args().Get(0), c.Args().Get(1), actor)
		},
	}
}

// runRestore makes version the content of the file at path again.
func runRestore(c *cli.Context, path, version, actor string) error {
	client, path, err := fileClient(c, path, version)
	if err != nil {
		return err
	}
	res, err := client.Restore(c.Context, unixsocket.RestoreRequest{Path: path, Version: version, Actor: actorOrUser(actor)})
	if err != nil {
		return daemonError(err)
	}
	if res.From == res.To {
		fmt.Printf("%s is already at %s\n", quote.Name(res.Path), res.To.Short())
		return nil
	}
	fmt.Printf("restored %s to %s (it was %s)\n", quote.Name(res.Path), res.To.Short(), describeVersion(res.From))
	return nil
}

func describeVersion(v versionstore.Version) string {
	if v.IsZero() {
		return "absent"
	}
	return v.Short()
}
