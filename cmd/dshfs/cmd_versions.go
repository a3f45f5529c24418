package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

// The version commands: show, diff and restore a file's versions, and
// checkpoints, rewind and collection of the whole workspace. Each talks to
// the daemon of the mount holding the path (or the current directory, or
// --mount).

var mountFlag = &cli.StringFlag{Name: "mount", Usage: "the mount point", DefaultText: "the mount holding the path or the current directory, else the only one"}

// clientFor finds the daemon of the mount holding path, of --mount, or (with
// neither) of the mount holding the working directory or the only one.
func clientFor(c *cli.Context, path string) (*unixsocket.Client, error) {
	if m := c.String("mount"); m != "" {
		path = absDir(m)
	}
	rec, err := locate(path)
	if err != nil {
		return nil, err
	}
	return unixsocket.NewClient(rec.Socket), nil
}

// daemonError turns an error of a call to the daemon into the CLI's exit
// status: what does not exist is "not found", a refusal because the file is
// being written a conflict, a daemon that does not answer "not reachable".
func daemonError(err error) error {
	var apiErr *unixsocket.APIError
	var opErr *net.OpError
	switch {
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound:
		return cli.Exit(apiErr.Message, exitNotFound)
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict:
		return cli.Exit(apiErr.Message, exitToolError)
	case errors.As(err, &apiErr):
		return cli.Exit(apiErr.Message, exitFailure)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return cli.Exit(err.Error()+"; dshfs status shows whether the mount's daemon runs", exitUnreachable)
	}
	return cli.Exit(err.Error(), exitFailure)
}

// checkVersions refuses, as usage errors, arguments that cannot name a
// version: b3:<hex>, or at least 4 hex digits of one ("" is no argument).
func checkVersions(args ...string) error {
	for _, a := range args {
		h := strings.ToLower(strings.TrimPrefix(a, "b3:"))
		if a == "" {
			continue
		}
		if len(h) < 4 || len(h) > 64 || strings.Trim(h, "0123456789abcdef") != "" {
			return cli.Exit(fmt.Sprintf("%q is not a version: give b3:<hex>, or at least 4 hex digits of one (dshfs log lists them)", a), exitUsage)
		}
	}
	return nil
}

// absPath is p made absolute, with the symlinks of its directory resolved:
// a mount is registered under its real path, however the caller spells it
// (a symlinked parent, $PWD). The last element is left for the daemon to
// resolve as a tool would.
func absPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	dir, base := filepath.Split(abs)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(real, base)
	}
	return abs
}

// absDir is the real path of the directory dir.
func absDir(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		if abs, err := filepath.Abs(real); err == nil {
			return abs
		}
	}
	return absPath(dir)
}

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print a file's bytes at one of its versions",
		ArgsUsage: "PATH@VERSION",
		Description: "VERSION is b3:<hex> or at least 4 hex digits of a version in the file's history (dshfs log\n" +
			"lists them). The bytes are checked against the version before they are printed.",
		Flags: []cli.Flag{mountFlag},
		Action: func(c *cli.Context) error {
			arg := c.Args().First()
			i := strings.LastIndex(arg, "@")
			if c.NArg() != 1 || i <= 0 || i == len(arg)-1 {
				return cli.Exit("show takes PATH@VERSION, e.g. show main.go@b3:1f2e3d4c", exitUsage)
			}
			if err := checkVersions(arg[i+1:]); err != nil {
				return err
			}
			path := absPath(arg[:i])
			client, err := clientFor(c, path)
			if err != nil {
				return err
			}
			data, err := client.Show(c.Context, "", path, arg[i+1:])
			if err != nil {
				return daemonError(err)
			}
			_, err = os.Stdout.Write(data)
			return err
		},
	}
}

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "show how a file changed between two versions, as a unified diff",
		ArgsUsage: "PATH [V1 [V2]]",
		Description: "With no version, the two newest versions are compared; with one, that version against the\n" +
			"newest. Versions as for show.",
		Flags: []cli.Flag{mountFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 || c.NArg() > 3 {
				return cli.Exit("diff takes PATH and up to two versions", exitUsage)
			}
			if err := checkVersions(c.Args().Get(1), c.Args().Get(2)); err != nil {
				return err
			}
			path := absPath(c.Args().Get(0))
			client, err := clientFor(c, path)
			if err != nil {
				return err
			}
			d, err := client.Diff(c.Context, "", path, c.Args().Get(1), c.Args().Get(2))
			if err != nil {
				return daemonError(err)
			}
			fmt.Print(d)
			return nil
		},
	}
}

func restoreCommand() *cli.Command {
	var actor string
	return &cli.Command{
		Name:      "restore",
		Usage:     "make a version of a file its content again (recorded as a restore, itself undoable)",
		ArgsUsage: "PATH VERSION",
		Description: "A guarded write: refused while a process is writing the file through the mount. The bytes the\n" +
			"file had are kept, so `dshfs restore PATH <the version it had>` undoes it.",
		Flags: []cli.Flag{mountFlag, &cli.StringFlag{Name: "actor", Usage: "who restores, for the history", Destination: &actor}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("restore takes PATH and VERSION", exitUsage)
			}
			if err := checkVersions(c.Args().Get(1)); err != nil {
				return err
			}
			path := absPath(c.Args().Get(0))
			client, err := clientFor(c, path)
			if err != nil {
				return err
			}
			res, err := client.Restore(c.Context, unixsocket.RestoreRequest{Path: path, Version: c.Args().Get(1), Actor: actor})
			if err != nil {
				return daemonError(err)
			}
			if res.From == res.To {
				fmt.Printf("%s is already at %s\n", res.Path, res.To.Short())
				return nil
			}
			fmt.Printf("restored %s to %s (it was %s)\n", res.Path, res.To.Short(), describeVersion(res.From))
			return nil
		},
	}
}

func describeVersion(v versionstore.Version) string {
	if v.IsZero() {
		return "absent"
	}
	return v.Short()
}

func checkpointCommand() *cli.Command {
	return &cli.Command{
		Name:      "checkpoint",
		Usage:     "record a checkpoint of the whole workspace (cheap: nothing is copied)",
		ArgsUsage: "[NAME]",
		Description: "Pins the version every file has now; `dshfs rewind NAME` brings them back. Without a name the\n" +
			"checkpoint is called cp-N.",
		Flags: []cli.Flag{mountFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return cli.Exit("checkpoint takes at most a name", exitUsage)
			}
			client, err := clientFor(c, "")
			if err != nil {
				return err
			}
			cp, err := client.Checkpoint(c.Context, c.Args().First())
			if err != nil {
				return daemonError(err)
			}
			fmt.Printf("checkpoint %s: %d files\n", cp.Name, cp.Files)
			return nil
		},
	}
}

func checkpointsCommand() *cli.Command {
	var asJSON bool
	return &cli.Command{
		Name:  "checkpoints",
		Usage: "list the checkpoints, oldest first",
		Flags: []cli.Flag{mountFlag, &cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &asJSON}},
		Action: func(c *cli.Context) error {
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
			if len(cps) == 0 {
				fmt.Println("no checkpoints")
				return nil
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTIME\tFILES\t")
			for _, cp := range cps {
				note := ""
				if cp.Auto {
					note = "(made by a rewind)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", cp.Name, cp.Time.Local().Format(time.DateTime), cp.Files, note)
			}
			return tw.Flush()
		},
	}
}

func rewindCommand() *cli.Command {
	var dryRun, asJSON bool
	var actor string
	return &cli.Command{
		Name:      "rewind",
		Usage:     "give every file changed since a checkpoint its version at the checkpoint",
		ArgsUsage: "CHECKPOINT",
		Description: "Restores changed files, recreates deleted ones and removes files created since — whoever\n" +
			"changed them: tools, shells, editors, git, or writes straight into the backing directory (recorded\n" +
			"first). A checkpoint is made first, so a rewind can be rewound. A file written during the rewind,\n" +
			"or whose bytes at the checkpoint are not kept, is reported as a conflict and left alone; the exit\n" +
			"status is then 1.",
		Flags: []cli.Flag{mountFlag,
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would change, change nothing", Destination: &dryRun},
			&cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &asJSON},
			&cli.StringFlag{Name: "actor", Usage: "who rewinds, for the history", Destination: &actor},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("rewind takes a checkpoint name (dshfs checkpoints lists them)", exitUsage)
			}
			client, err := clientFor(c, "")
			if err != nil {
				return err
			}
			bar := newProgressBar(os.Stderr, "rewind")
			res, err := client.Rewind(c.Context, unixsocket.RewindRequest{Checkpoint: c.Args().First(), DryRun: dryRun, Actor: actor}, bar.update)
			bar.done()
			if err != nil {
				return daemonError(err)
			}
			if asJSON {
				if err := printJSON(res); err != nil {
					return err
				}
			} else {
				printRewind(os.Stdout, res)
			}
			if res.Conflicts > 0 {
				return cli.Exit("", exitToolError)
			}
			return nil
		},
	}
}

func printRewind(w io.Writer, res unixsocket.RewindResult) {
	verbs := map[string][2]string{"restore": {"restored", "would restore"}, "recreate": {"recreated", "would recreate"}, "remove": {"removed", "would remove"}}
	for _, a := range res.Actions {
		if a.Error != "" {
			fmt.Fprintf(w, "conflict  %s: %s\n", a.Path, a.Error)
			continue
		}
		verb := verbs[a.Op][0]
		if res.DryRun {
			verb = verbs[a.Op][1]
		}
		fmt.Fprintf(w, "%-9s %s\n", verb, a.Path)
	}
	switch {
	case len(res.Actions) == 0:
		fmt.Fprintf(w, "nothing changed since %s\n", res.Checkpoint)
	case res.DryRun:
		fmt.Fprintf(w, "dry run: %d file(s) would change, %d conflict(s)\n", len(res.Actions)-res.Conflicts, res.Conflicts)
	default:
		fmt.Fprintf(w, "rewound to %s: %d file(s) changed, %d conflict(s); undo with: dshfs rewind %s\n",
			res.Checkpoint, len(res.Actions)-res.Conflicts, res.Conflicts, res.Before)
	}
}

func gcCommand() *cli.Command {
	var asJSON bool
	return &cli.Command{
		Name:  "gc",
		Usage: "drop kept bytes past the retention age or the budget (it also runs by itself)",
		Description: "Never drops the current version of a file or a version a checkpoint needs. The budget and age\n" +
			"are `dshfs mount --retain-bytes` and `--retain-age`.",
		Flags: []cli.Flag{mountFlag, &cli.BoolFlag{Name: "json", Usage: "print JSON for scripts", Destination: &asJSON}},
		Action: func(c *cli.Context) error {
			client, err := clientFor(c, "")
			if err != nil {
				return err
			}
			bar := newProgressBar(os.Stderr, "gc")
			res, err := client.GC(c.Context, bar.update)
			bar.done()
			if err != nil {
				return daemonError(err)
			}
			if asJSON {
				return printJSON(res)
			}
			fmt.Printf("dropped %d object(s), %s; kept %d (%d pinned), %s of a %s budget\n",
				res.Removed, humanBytes(res.FreedBytes), res.Objects, res.Pinned, humanBytes(res.StoredBytes), humanBytes(res.BudgetBytes))
			return nil
		},
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// progressBar draws a one-line bar on a terminal and nothing otherwise.
type progressBar struct {
	w     io.Writer
	label string
	on    bool
	drawn bool
}

func newProgressBar(f *os.File, label string) *progressBar {
	return &progressBar{w: f, label: label, on: isTerminal(f)}
}

func (p *progressBar) update(pr unixsocket.Progress) {
	if !p.on || pr.Total == 0 {
		return
	}
	const width = 30
	filled := width * pr.Done / pr.Total
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d", p.label, strings.Repeat("#", filled), strings.Repeat("-", width-filled), pr.Done, pr.Total)
	p.drawn = true
}

func (p *progressBar) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
