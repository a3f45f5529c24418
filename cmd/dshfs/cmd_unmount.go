package main

import (
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
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("unmount takes the mount point", exitUsage)
			}
			abs := absDir(c.Args().First())
			rec, ok := findMount(abs)
			if !ok || rec.MountPoint != abs {
				return cli.Exit(fmt.Sprintf("no running dshfs mount at %s", abs), exitNotFound)
			}
			p, err := os.FindProcess(rec.Pid)
			if err == nil {
				err = p.Signal(syscall.SIGTERM)
			}
			if err != nil {
				return cli.Exit(fmt.Sprintf("signal the daemon (pid %d): %v", rec.Pid, err), exitFailure)
			}
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if !processAlive(rec.Pid) {
					if b, err := os.ReadFile(filepath.Join(rec.StateDir, unmountErrorFile)); err == nil {
						return cli.Exit(fmt.Sprintf("the daemon (pid %d) exited, but: %s", rec.Pid, strings.TrimSpace(string(b))), exitFailure)
					}
					return nil
				}
			}
			return cli.Exit(fmt.Sprintf("the daemon (pid %d) did not exit within 30 s", rec.Pid), exitFailure)
		},
	}
}

// processAlive reports whether pid is a running process.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
