package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/dshfs/dshfs/daemon"
	"github.com/dshfs/dshfs/internal/quote"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

func unmountCommand() *cli.Command {
	var lazy bool
	return &cli.Command{
		Name:      "unmount",
		Usage:     "unmount a running dshfs mount cleanly (its daemon commits and exits)",
		ArgsUsage: "MOUNTPOINT",
		Description: "A mount some process still uses (a shell's working directory, an open file) is left mounted,\n" +
			"and the processes are named (exit status 3); --lazy detaches it anyway. A mount whose daemon\n" +
			"died is detached. Exit status 4 if no dshfs mount is at MOUNTPOINT, 5 if its daemon cannot be\n" +
			"reached or is not the mount's own (another user's mount: only that user and root may unmount it).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "lazy", Usage: "detach the mount even while processes use it: their later calls there fail (Transport endpoint is not connected)", Destination: &lazy},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("unmount takes the mount point", exitUsage)
			}
			return runUnmount(c.Context, absDir(c.Args().First()), lazy)
		},
	}
}

// maxHoldersShown bounds the processes an unmount names.
const maxHoldersShown = 10

// runUnmount has the daemon of the mount at mnt unmount it and exit; a
// mount whose daemon is gone is detached. A mount in use stays mounted
// unless lazy.
func runUnmount(ctx context.Context, mnt string, lazy bool) error {
	e, ok := daemon.MountAt(mnt)
	if !ok {
		return cli.Exit(fmt.Sprintf("no dshfs mount at %s; dshfs status lists the running mounts", quote.Name(mnt)), exitNotFound)
	}
	if b := e.Record.Branch; b != "" {
		return cli.Exit(fmt.Sprintf("%s is the branch %s of a workspace, served by the workspace's daemon: dshfs branch drop %s removes it, and unmounting the workspace stops it",
			quote.Name(e.MountPoint), quote.Name(b), quote.Name(b)), exitUsage)
	}
	os.Chdir("/") // this command's own working directory must not hold it
	holders := daemon.Holders(e.MountPoint)
	switch {
	case len(holders) > 0 && !lazy:
		fmt.Fprintf(os.Stderr, "dshfs: %s is in use, so it stays mounted:\n%s", quote.Name(e.MountPoint), daemon.DescribeHolders(holders, maxHoldersShown))
		return cli.Exit("leave it (cd out of it, close the files) and run dshfs unmount again, or dshfs unmount --lazy to detach it now "+
			"(those processes then fail there with \"Transport endpoint is not connected\")", exitFailure)
	case len(holders) > 0:
		fmt.Fprintf(os.Stderr, "dshfs: detaching %s while in use; these processes will fail there with \"Transport endpoint is not connected\":\n%s",
			quote.Name(e.MountPoint), daemon.DescribeHolders(holders, maxHoldersShown))
	}
	if e.SecondMountPoint() {
		return unmountSecond(e, lazy)
	}
	detached, err := daemon.Stop(ctx, e)
	switch {
	case errors.Is(err, daemon.ErrDetachedInUse) && lazy:
		fmt.Printf("dshfs: detached %s; its daemon has exited\n", quote.Name(e.MountPoint))
		return nil
	case errors.Is(err, daemon.ErrDetachedInUse):
		return cli.Exit(fmt.Sprintf("%s was detached, but a process entered it meanwhile and is now stranded there (Transport endpoint is not connected)", quote.Name(e.MountPoint)), exitFailure)
	case err != nil:
		return lookupExit(err)
	}
	if detached {
		fmt.Printf("dshfs: detached %s, whose daemon was gone\n", quote.Name(e.MountPoint))
	}
	return nil
}

// unmountSecond takes down a second mount point of a mount (a bind mount
// of it): the kernel's unmount of that one place, which leaves the mount
// it shows and its daemon serving.
func unmountSecond(e daemon.Entry, lazy bool) error {
	var err error
	if lazy {
		err = daemon.DetachMount(e.MountPoint)
	} else {
		err = unix.Unmount(e.MountPoint, 0)
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("unmount %s: %v", quote.Name(e.MountPoint), err), exitFailure)
	}
	fmt.Printf("dshfs: unmounted %s, a second mount point of %s, which stays mounted\n", quote.Name(e.MountPoint), quote.Name(e.Record.MountPoint))
	return nil
}
