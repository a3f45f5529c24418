package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/urfave/cli/v2"
)

func statusCommand() *cli.Command {
	var asJSON bool
	return &cli.Command{
		Name:      "status",
		Usage:     "show the running mounts (all of them, or the one at MOUNTPOINT)",
		ArgsUsage: "[MOUNTPOINT]",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &asJSON}},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return cli.Exit("status takes at most one mount point", exitUsage)
			}
			return runStatus(c.Context, c.Args().First(), asJSON)
		},
	}
}

func runStatus(ctx context.Context, mountpoint string, asJSON bool) error {
	recs := runningMounts()
	if mountpoint != "" {
		abs, _ := filepath.Abs(mountpoint)
		rec, ok := findMount(abs)
		if !ok {
			return cli.Exit(fmt.Sprintf("no running dshfs mount at %s", mountpoint), exitFailure)
		}
		recs = []mountRecord{rec}
	}
	var all []unixsocket.Status
	for _, r := range recs {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := unixsocket.NewClient(r.Socket).Status(ctx)
		cancel()
		if err != nil {
			st = unixsocket.Status{MountPoint: r.MountPoint, Backing: r.Backing, Socket: r.Socket, StateDir: r.StateDir}
		}
		all = append(all, st)
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if all == nil {
			all = []unixsocket.Status{}
		}
		return enc.Encode(all)
	}
	if len(all) == 0 {
		fmt.Println("no dshfs mounts running")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MOUNT\tBACKING\tFILES\tDIRTY\tACTORS\tUPTIME")
	for _, st := range all {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", st.MountPoint, st.Backing, st.FilesIndexed, st.DirtyFiles,
			len(st.Actors), (time.Duration(st.UptimeSeconds) * time.Second).String())
	}
	return tw.Flush()
}

// runningMounts lists the registered mounts whose daemon is alive; records
// of dead daemons are removed.
func runningMounts() []mountRecord {
	dir, err := registryDir()
	if err != nil {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []mountRecord
	for _, f := range files {
		var r mountRecord
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &r) != nil {
			continue
		}
		if !processAlive(r.Pid) {
			os.Remove(f)
			continue
		}
		out = append(out, r)
	}
	return out
}
