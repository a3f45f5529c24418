package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/dshfs/dshfs/daemon"
	"github.com/dshfs/dshfs/internal/quote"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

func statusCommand() *cli.Command {
	var asJSON bool
	return &cli.Command{
		Name:      "status",
		Usage:     "show the running mounts (every dshfs on the machine, or the one holding PATH)",
		ArgsUsage: "[PATH]",
		Description: "Every dshfs mount of the kernel's mount table is listed, whoever made it. Only this user's\n" +
			"own are asked (root: its own, and another user's when PATH is its mount point): their daemon's\n" +
			"pid and socket, and what the daemon reports, once it is checked to be the mount's own. With\n" +
			"PATH, exit status 4 if no mount holds it and 5 if its daemon cannot be reached.",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON for scripts: a list of mounts with pid and socket", Destination: &asJSON}},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return cli.Exit("status takes at most one path", exitUsage)
			}
			return runStatus(c.Context, c.Args().First(), asJSON)
		},
	}
}

// statusEntry is one mount of status: its daemon's own report when it
// answers this user, what the mount table says otherwise.
type statusEntry struct {
	unixsocket.Status
	Pid  int    `json:"pid,omitempty"`
	UID  int    `json:"uid"`
	Note string `json:"note,omitempty"`
}

func runStatus(ctx context.Context, path string, asJSON bool) error {
	all := daemon.ListMounts()
	if path != "" {
		e, err := daemon.Find(daemon.Query{Mount: absDir(path)})
		if err != nil {
			return cli.Exit(fmt.Sprintf("no dshfs mount holds %s", quote.Name(path)), exitNotFound)
		}
		all = []daemon.Entry{e}
	}
	entries := make([]statusEntry, len(all))
	var wg sync.WaitGroup
	for i, e := range all {
		wg.Add(1)
		go func() { defer wg.Done(); entries[i] = statusOf(ctx, e) }()
	}
	wg.Wait()
	err := printEntries(entries, asJSON)
	if err == nil && path != "" && entries[0].Note != "" {
		return cli.Exit("", exitUnreachable)
	}
	return err
}

// statusOf asks e's daemon for its status, if this user may ask it and it
// proves to be e's (daemon.Dial).
func statusOf(ctx context.Context, e daemon.Entry) statusEntry {
	out := statusEntry{Status: unixsocket.Status{MountPoint: e.MountPoint, Backing: e.Backing}, UID: e.UID, Note: e.Note()}
	if e.Err != nil {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := daemon.Dial(ctx, e)
	if err != nil {
		out.Note = daemon.DialNote(err)
		return out
	}
	defer d.Client.CloseIdle()
	out.Pid = d.Record.Pid
	st, err := d.Client.Status(ctx)
	if err != nil {
		out.Note = "daemon not answering: " + err.Error()
		return out
	}
	out.Status = st
	return out
}

// printEntries prints the mounts as a table, or as JSON.
func printEntries(entries []statusEntry, asJSON bool) error {
	if asJSON {
		return printJSON(entries)
	}
	return printStatus(entries)
}

func printStatus(entries []statusEntry) error {
	if len(entries) == 0 {
		fmt.Println("no dshfs mounts running")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MOUNT\tBACKING\tFILES\tDIRTY\tACTORS\tUPTIME\tUID\tPID\t")
	for _, e := range entries {
		mnt, backing := quote.Name(e.MountPoint), quote.Name(e.Backing)
		if e.Note != "" {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t%d\t%s\t(%s)\n", mnt, backing, e.UID, pidText(e.Pid), quote.Text(e.Note))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%d\t%d\t\n", mnt, backing, e.FilesIndexed, e.DirtyFiles,
			e.Actors.Count, (time.Duration(e.UptimeSeconds) * time.Second).String(), e.UID, e.Pid)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range entries {
		if r := e.IndexSalvage; r != nil {
			fmt.Println(salvageText(e.MountPoint, r))
		}
		if r := e.Remote; r != nil {
			fmt.Println(remoteText(e.MountPoint, r))
		}
		if t := transportLine(e.MountPoint, e.Transport, e.TransportNote); t != "" {
			fmt.Println(t)
		}
	}
	return nil
}

// transportLine says what carries a mount's requests when it is not the
// default, or why io_uring, asked for, does not.
func transportLine(mnt, transport, note string) string {
	switch {
	case note != "":
		return fmt.Sprintf("%s: requests over %s, not io_uring: %s", quote.Name(mnt), transport, quote.Text(note))
	case transport == "io_uring":
		return fmt.Sprintf("%s: requests over io_uring", quote.Name(mnt))
	}
	return ""
}

// salvageText says what the salvage of a mount's damaged index lost and
// kept, and where the damaged file is, for a person deciding whether to
// look at it.
func salvageText(mnt string, r *versionstore.SalvageReport) string {
	if r.Unreadable != "" {
		return fmt.Sprintf("%s: the index was damaged and nothing could be read from it (%s) at %s: the history, checkpoints and observations it held are lost; the damaged index is kept in %s",
			quote.Name(mnt), quote.Text(r.Unreadable), r.At.Local().Format(time.DateTime), quote.Name(r.From))
	}
	lost := "every page of it could be read"
	switch {
	case r.Lost == 1:
		lost = "1 page of it could not be read"
	case r.Lost > 1:
		lost = fmt.Sprintf("%d pages of it could not be read", r.Lost)
	}
	history := "history may miss changes after " + r.CompleteUntil.Local().Format(time.DateTime)
	if r.CompleteUntil.IsZero() {
		history = "no change in its journal could be read: history may miss any change before the salvage"
	}
	return fmt.Sprintf("%s: the index was damaged and salvaged at %s: %s; %s; the damaged index is kept in %s; %s",
		quote.Name(mnt), r.At.Local().Format(time.DateTime), lost, copiedText(r.Copied), quote.Name(r.From), history)
}

// copiedText counts the entries a salvage copied, the most numerous kind
// first.
func copiedText(copied map[string]int) string {
	kinds := slices.Collect(maps.Keys(copied))
	slices.SortFunc(kinds, func(a, b string) int { return cmp.Or(copied[b]-copied[a], strings.Compare(a, b)) })
	var parts []string
	for _, k := range kinds {
		if copied[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", copied[k], k))
		}
	}
	switch len(parts) {
	case 0:
		return "nothing could be copied: the history, checkpoints and observations it held are lost"
	case 1:
		return parts[0] + " entries were copied"
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1] + " entries were copied"
}

func pidText(pid int) string {
	if pid == 0 {
		return "-"
	}
	return fmt.Sprint(pid)
}

// printJSON prints v indented, for scripts.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
