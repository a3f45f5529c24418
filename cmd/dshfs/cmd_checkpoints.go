package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/dshfs/dshfs/internal/quote"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/urfave/cli/v2"
)

func checkpointsCommand() *cli.Command {
	var asJSON bool
	var remoteURL string
	return &cli.Command{
		Name:  "checkpoints",
		Usage: "list the checkpoints, oldest first",
		Flags: []cli.Flag{mountFlag, remoteFlagTo(&remoteURL), &cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &asJSON}},
		Action: func(c *cli.Context) error {
			if remoteURL != "" {
				return runRemoteCheckpoints(c, remoteURL, asJSON)
			}
			return runCheckpoints(c, asJSON)
		},
	}
}

// runCheckpoints lists the checkpoints, oldest first.
func runCheckpoints(c *cli.Context, asJSON bool) error {
	client, err := clientFor(c, "")
	if err != nil {
		return err
	}
	cps, err := client.Checkpoints(c.Context)
	if err != nil {
		return daemonError(err)
	}
	if asJSON {
		return printJSON(cps)
	}
	return printCheckpoints(os.Stdout, cps)
}

// printCheckpoints is the checkpoints as a table, or says there are none.
func printCheckpoints(w io.Writer, cps []unixsocket.Checkpoint) error {
	if len(cps) == 0 {
		_, err := fmt.Fprintln(w, "no checkpoints")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTIME\tFILES\t")
	for _, cp := range cps {
		note := ""
		if cp.Auto {
			note = "(made by a rewind)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", quote.Name(cp.Name), cp.Time.Local().Format(time.DateTime), cp.Files, note)
	}
	return tw.Flush()
}
