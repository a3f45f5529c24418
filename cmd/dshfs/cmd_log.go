package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

func logCommand() *cli.Command {
	var asJSON bool
	return &cli.Command{
		Name:      "log",
		Usage:     "show the version history of a file in a running mount, newest first",
		ArgsUsage: "PATH",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &asJSON}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("log takes one path", exitUsage)
			}
			return runLog(c.Context, c.Args().First(), asJSON)
		},
	}
}

func runLog(ctx context.Context, path string, asJSON bool) error {
	abs := absPath(path)
	rec, err := locate(abs)
	if err != nil {
		return err
	}
	h, err := unixsocket.NewClient(rec.Socket).History(ctx, "", abs)
	if err != nil {
		return daemonError(err)
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(h)
	}
	if len(h) == 0 {
		fmt.Printf("no versions recorded for %s\n", path)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tVERSION\tSIZE\tBYTES\tWRITER")
	for _, e := range h {
		v, size, kept := e.Version.Short(), strconv.FormatInt(e.Size, 10), "not kept"
		switch {
		case e.Deleted:
			v, size, kept = "(deleted)", "-", "-"
		case e.Kept:
			kept = "kept"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format(time.DateTime), v, size, kept, describeWriter(e.Writer))
	}
	return tw.Flush()
}

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
		return fmt.Sprintf("mount, %s (pid %d, uid %d)", w.Comm, w.Pid, w.Uid)
	}
	return string(w.Kind)
}
