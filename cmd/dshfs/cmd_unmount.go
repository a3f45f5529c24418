package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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
			abs := absDir(c.Args().First())
			for _, e := range listMounts() {
				if e.MountPoint == abs {
					return runUnmount(e)
				}
			}
			return cli.Exit(fmt.Sprintf("no dshfs mount at %s; dshfs status lists the running mounts", abs), exitNotFound)
		},
	}
}

// runUnmount asks e's daemon to unmount (SIGTERM) and waits for it to exit;
// a mount whose daemon is gone is detached.
func runUnmount(e mountEntry) error {
	if errors.Is(e.Err, syscall.ENOTCONN) {
		if err := detachMount(e.MountPoint); err != nil {
			return cli.Exit(fmt.Sprintf("%s has lost its daemon and could not be detached: %v", e.MountPoint, err), exitFailure)
		}
		fmt.Printf("dshfs: detached %s, whose daemon was gone\n", e.MountPoint)
		return nil
	}
	if err := reachable(e); err != nil {
		return err
	}
	pid := e.Record.Pid
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Signal(syscall.SIGTERM)
	}
	if err != nil {
		return cli.Exit(fmt.Sprintf("signal the daemon (pid %d): %v", pid, err), exitFailure)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !processAlive(pid) {
			if b, err := os.ReadFile(filepath.Join(e.Record.StateDir, unmountErrorFile)); err == nil {
				return cli.Exit(fmt.Sprintf("the daemon (pid %d) exited, but: %s", pid, strings.TrimSpace(string(b))), exitFailure)
			}
			return nil
		}
	}
	return cli.Exit(fmt.Sprintf("the daemon (pid %d) did not exit within 30 s", pid), exitFailure)
}

// processAlive reports whether pid is a running process.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
