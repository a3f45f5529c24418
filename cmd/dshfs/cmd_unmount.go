package main

import (
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
			"its daemon cannot be reached (another user's mount).",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("unmount takes the mount point", exitUsage)
			}
			return runUnmount(absDir(c.Args().First()))
		},
	}
}

// runUnmount has the daemon of the mount at mnt unmount it and exit; a
// mount whose daemon is gone is detached.
func runUnmount(mnt string) error {
	e, ok := mountAt(daemon.ListMounts(), mnt)
	if !ok {
		return cli.Exit(fmt.Sprintf("no dshfs mount at %s; dshfs status lists the running mounts", quote.Name(mnt)), exitNotFound)
	}
	detached, err := daemon.Stop(e)
	if err != nil {
		return lookupExit(err)
	}
	if detached {
		fmt.Printf("dshfs: detached %s, whose daemon was gone\n", quote.Name(e.MountPoint))
	}
	return nil
}

// mountAt is the mount of all whose mount point is mnt.
func mountAt(all []daemon.Entry, mnt string) (daemon.Entry, bool) {
	for _, e := range all {
		if e.MountPoint == mnt {
			return e, true
		}
	}
	return daemon.Entry{}, false
}
