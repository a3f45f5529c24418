package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/dshfs/dshfs/internal/quote"
	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

// logOptions are the flags of `dshfs log`.
type logOptions struct {
	Paths []string
	Since string
	Limit int
	All   bool
	JSON  bool
	// Writer keeps the entries of one actor, or of one kind of writer.
	Writer string
	// Remote reads a replicated history (s3://BUCKET/PREFIX) instead.
	Remote string
}

// defaultLogLimit is how many changes or versions log shows unless told:
// a long session's log is hundreds of thousands of entries.
const defaultLogLimit = 50

func logCommand() *cli.Command {
	var o logOptions
	return &cli.Command{
		Name:      "log",
		Usage:     "show what changed in a running mount, newest first: the workspace's changes, or one file's versions",
		ArgsUsage: "[PATH...]",
		Description: "With no path, or with --since, every change to the workspace, newest first — path, what\n" +
			"happened (create, write, delete, rename), the version, who made it and when — by tools, shells,\n" +
			"editors, git and writes straight into the backing directory alike; paths limit it to themselves\n" +
			"and what is below them. With one path and no --since, that file's versions and whether their\n" +
			"bytes are kept (and why not).\n\n" +
			"--since takes a checkpoint's name, a time (2006-01-02 15:04, or RFC 3339) or a duration (30m).\n" +
			"The newest 50 are shown, and a last line says how many more there are: --limit sets how many,\n" +
			"--all (or --limit 0) shows every one. --writer keeps the entries of one actor (a tool's, a\n" +
			"registered shell's, a restore's) or one kind of writer: tool, mount, external (straight into the\n" +
			"backing directory), baseline (the content a file had when dshfs first saw it) or restore.",
		Flags: []cli.Flag{mountFlag, remoteFlagTo(&o.Remote),
			&cli.StringFlag{Name: "since", Usage: "only changes since a checkpoint, a time or a duration ago", Destination: &o.Since},
			&cli.IntFlag{Name: "limit", Usage: "at most this many changes or versions, newest first (0: all)", Value: defaultLogLimit, Destination: &o.Limit},
			&cli.BoolFlag{Name: "all", Usage: "every change or version, however many", Destination: &o.All},
			&cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &o.JSON},
			&cli.StringFlag{Name: "writer", Usage: "only the entries of one actor, or one kind of writer (tool, mount, external, baseline, restore)", Destination: &o.Writer},
		},
		Action: func(c *cli.Context) error {
			if o.Remote != "" {
				return runRemoteLog(c, o, c.Args().Slice())
			}
			o.Paths = cliPaths(c, c.Args().Slice())
			return runLog(c, o)
		},
	}
}

// runLog prints one file's versions (one path, no --since), or else the
// workspace's changes.
func runLog(c *cli.Context, o logOptions) error {
	client, err := clientForPaths(c, o.Paths)
	if err != nil {
		return err
	}
	if len(o.Paths) == 1 && o.Since == "" {
		return runHistory(c.Context, client, o.Paths[0], o)
	}
	return runChanges(c.Context, client.Log, o)
}

// limit is how many entries to show, 0 for all.
func (o logOptions) limit() int {
	if o.All {
		return 0
	}
	return max(o.Limit, 0)
}

// runChanges prints the workspace's changes, as log answers them.
func runChanges(ctx context.Context, log func(context.Context, toolapi.SessionQuery) ([]unixsocket.Change, error), o logOptions) error {
	limit := o.limit()
	q := toolapi.SessionQuery{Since: o.Since, Paths: o.Paths, Limit: limit}
	if o.Writer != "" {
		q.Limit = 0 // filtered here: the limit counts what is kept
	} else if limit > 0 {
		q.Limit++ // one more tells whether there are more
	}
	changes, err := log(ctx, q)
	if err != nil {
		return daemonError(err)
	}
	changes = keepWriter(changes, o.Writer, func(c unixsocket.Change) versionstore.Writer { return c.Writer })
	more := limit > 0 && len(changes) > limit
	if more {
		changes = changes[:limit]
	}
	defer func() {
		if more {
			sayCut(o.JSON, "… older changes not shown; --all shows them")
		}
	}()
	if o.JSON {
		if changes == nil {
			changes = []unixsocket.Change{}
		}
		return printJSON(changes)
	}
	if len(changes) == 0 {
		fmt.Println("no changes recorded")
		return nil
	}
	printChanges(os.Stdout, changes)
	return nil
}

// sayCut says that log left entries out: after the table, or, not to spoil
// JSON, on standard error.
func sayCut(asJSON bool, note string) {
	if asJSON {
		fmt.Fprintln(os.Stderr, note)
		return
	}
	fmt.Println(note)
}

// printChanges is the log as a table.
func printChanges(w io.Writer, changes []unixsocket.Change) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tOP\tPATH\tVERSION\tWRITER")
	for _, c := range changes {
		path := quote.Name(c.Path)
		switch {
		case c.From != "":
			path += " (from " + quote.Name(c.From) + ")"
		case c.To != "":
			path += " (to " + quote.Name(c.To) + ")"
		case c.Via != "":
			path += " (saved via " + quote.Name(c.Via) + ")"
		}
		v := describeVersion(c.Version)
		if c.NotKept != "" {
			v += " (bytes not kept: " + c.NotKept + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Time.Local().Format(time.DateTime), c.Op, path, v, describeWriter(c.Writer))
	}
	tw.Flush()
}

// runHistory prints one file's newest versions, limit of them (0: all).
func runHistory(ctx context.Context, client *unixsocket.Client, path string, o logOptions) error {
	h, err := client.History(ctx, "", path)
	if err != nil {
		return daemonError(err)
	}
	return printVersions(h, path, o)
}

// printVersions prints a file's versions h as o asks.
func printVersions(h []unixsocket.HistoryEntry, path string, o logOptions) error {
	asJSON, limit := o.JSON, o.limit()
	h = keepWriter(h, o.Writer, func(e unixsocket.HistoryEntry) versionstore.Writer { return e.Writer })
	if older := len(h) - limit; limit > 0 && older > 0 {
		h = h[:limit]
		defer sayCut(asJSON, fmt.Sprintf("… %d older versions not shown; --all shows them", older))
	}
	if asJSON {
		return printJSON(h)
	}
	if len(h) == 0 {
		fmt.Printf("no versions recorded for %s\n", quote.Name(path))
		return nil
	}
	return printHistory(os.Stdout, h)
}

// keepWriter keeps the entries written by sel, an actor or a kind of
// writer (all of them if sel is empty).
func keepWriter[E any](entries []E, sel string, writer func(E) versionstore.Writer) []E {
	if sel == "" {
		return entries
	}
	var out []E
	for _, e := range entries {
		if w := writer(e); w.Actor == sel || string(w.Kind) == sel {
			out = append(out, e)
		}
	}
	return out
}

// printHistory is a file's versions as a table.
func printHistory(w io.Writer, h []unixsocket.HistoryEntry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tVERSION\tSIZE\tBYTES\tWRITER")
	for _, e := range h {
		v, size, kept := e.Version.Short(), strconv.FormatInt(e.Size, 10), "kept"
		switch {
		case e.Deleted:
			v, size, kept = "(deleted)", "-", "-"
		case !e.Kept:
			kept = "not kept: " + e.NotKept
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format(time.DateTime), v, size, kept, describeWriter(e.Writer))
	}
	return tw.Flush()
}

// describeWriter says who wrote a version: `mount, sed (pid 812) for
// harness-1` for a harness's shell. A process names itself, so its name is
// quoted when it holds what a terminal would act on.
func describeWriter(w versionstore.Writer) string {
	switch w.Kind {
	case versionstore.WriterTool:
		return "tool, actor " + fmt.Sprintf("%q", w.Actor)
	case versionstore.WriterRestore:
		if w.Actor != "" {
			return "restore, by " + fmt.Sprintf("%q", w.Actor)
		}
		return "restore"
	case versionstore.WriterMount:
		s := fmt.Sprintf("mount, %s (pid %d, uid %d)", quote.Name(w.Comm), w.Pid, w.Uid)
		if w.Actor != "" {
			s += " for " + quote.Name(w.Actor)
		}
		return s
	}
	return string(w.Kind)
}
