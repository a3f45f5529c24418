package main

import (
	"context"
	"fmt"

	"github.com/dshfs/dshfs/daemon"
	"github.com/dshfs/dshfs/internal/quote"
	"github.com/urfave/cli/v2"
)

func unmountCommand() *cli.Command {
	return &cli.Command{
		Name:      "unmount",
		Usage:     "unmount a running dshfs mount cleanly (its daemon commits and exits)",
		ArgsUsage: "MOUNTPOINT",
		Description: "A mount whose daemon died is detached. Exit status 4 if no dshfs mount is at MOUNTPOINT, 5 if\n" +
			"its daemon cannot be reached or is not the mount's own (another user's mount: only that user\n" +
			"and root may unmount it).",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("unmount takes the mount point", exitUsage)
			}
			return runUnmount(c.Context, absDir(c.Args().First()))
		},
	}
}

// runUnmount has the daemon of the mount at mnt unmount it and exit; a
// mount whose daemon is gone is detached.
func runUnmount(ctx context.Context, mnt string) error {
	e, ok := daemon.MountAt(mnt)
	if !ok {
		return cli.Exit(fmt.Sprintf("no dshfs mount at %s; dshfs status lists the running mounts", quote.Name(mnt)), exitNotFound)
	}
	detached, err := daemon.Stop(ctx, e)
	if err != nil {
		return lookupExit(err)
	}
	if detached {
		fmt.Printf("dshfs: detached %s, whose daemon was gone\n", quote.Name(e.MountPoint))
	}
	return nil
}
