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
		Usage:     "show the running mounts (every dshfs on the machine, or the one at MOUNTPOINT)",
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

// systemMount is a dshfs mount in the kernel's mount table.
type systemMount struct {
	MountPoint, Backing string
	UID                 int
}

// statusEntry is one line of status: a mount's own report when its daemon
// answers this user, what the mount table says otherwise.
type statusEntry struct {
	unixsocket.Status
	UID  int    `json:"uid"`
	Note string `json:"note,omitempty"`
}

func runStatus(ctx context.Context, mountpoint string, asJSON bool) error {
	recs := runningMounts()
	if mountpoint != "" {
		abs := absDir(mountpoint)
		rec, ok := findMount(abs)
		if !ok {
			return cli.Exit(fmt.Sprintf("no running dshfs mount at %s", mountpoint), exitNotFound)
		}
		recs = []mountRecord{rec}
	}
	var all []statusEntry
	mine := map[string]bool{}
	for _, r := range recs {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := unixsocket.NewClient(r.Socket).Status(ctx)
		cancel()
		e := statusEntry{Status: st, UID: os.Getuid()}
		if err != nil {
			e.Status = unixsocket.Status{MountPoint: r.MountPoint, Backing: r.Backing, Socket: r.Socket, StateDir: r.StateDir}
			e.Note = "daemon not answering"
		}
		mine[r.MountPoint] = true
		all = append(all, e)
	}
	if mountpoint == "" {
		// Mounts of other users (or of this user under another state
		// directory): the kernel's table says where, not what is inside.
		for _, m := range systemMounts() {
			if mine[m.MountPoint] {
				continue
			}
			note := "run by another user"
			if m.UID == os.Getuid() {
				note = "registered under another state directory"
			}
			all = append(all, statusEntry{Status: unixsocket.Status{MountPoint: m.MountPoint, Backing: m.Backing}, UID: m.UID, Note: note})
		}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if all == nil {
			all = []statusEntry{}
		}
		return enc.Encode(all)
	}
	if len(all) == 0 {
		fmt.Println("no dshfs mounts running")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MOUNT\tBACKING\tFILES\tDIRTY\tACTORS\tUPTIME\tUID\t")
	for _, e := range all {
		if e.Note != "" {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t%d\t(%s)\n", e.MountPoint, e.Backing, e.UID, e.Note)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\t\n", e.MountPoint, e.Backing, e.FilesIndexed, e.DirtyFiles,
			e.Actors.Count, (time.Duration(e.UptimeSeconds) * time.Second).String(), e.UID)
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
