package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dshfs/dshfs/daemon"
	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

// execOptions are the flags of `dshfs exec`.
type execOptions struct {
	Backing  string
	StateDir string
	Actor    string
	Cwd      string
	NoPolicy bool
	JSON     bool
	Tool     string
	Args     string
}

func execCommand() *cli.Command {
	var o execOptions
	return &cli.Command{
		Name:      "exec",
		Usage:     "run one tool in-process against a workspace directory (no daemon)",
		ArgsUsage: "TOOL 'JSON-ARGUMENTS'",
		Description: "Runs read, write or edit directly on the workspace's index, as the daemon would, and prints\n" +
			"exactly the text the model sees. Exit status 1 when the tool returns an error.\n\n" +
			"Example: dshfs exec --backing ./ws --actor me read '{\"file_path\":\"main.go\"}'",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "backing", Usage: "workspace directory", Required: true, Destination: &o.Backing},
			&cli.StringFlag{Name: "state", Usage: "state directory holding the index (default: per-workspace under the user's state dir)", Destination: &o.StateDir},
			&cli.StringFlag{Name: "actor", Usage: "actor whose observations the call uses", Destination: &o.Actor},
			&cli.StringFlag{Name: "cwd", Usage: "absolute directory relative paths resolve against", Destination: &o.Cwd},
			&cli.BoolFlag{Name: "no-policy", Usage: "bare mode: no read-before-write checks", Destination: &o.NoPolicy},
			&cli.BoolFlag{Name: "json", Usage: "print the whole result as JSON", Destination: &o.JSON},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("exec takes a tool name and its JSON arguments, e.g. exec read '{\"file_path\":\"a.txt\"}'", exitUsage)
			}
			o.Tool, o.Args = c.Args().Get(0), c.Args().Get(1)
			return runExec(c.Context, o)
		},
	}
}

func runExec(ctx context.Context, o execOptions) error {
	if !json.Valid([]byte(o.Args)) {
		return cli.Exit("the arguments are not valid JSON", exitUsage)
	}
	svc, closeFn, err := openService(o.Backing, o.StateDir, !o.NoPolicy)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	defer closeFn()
	res, err := svc.Call(ctx, o.Tool, toolapi.Request{Actor: o.Actor, Cwd: o.Cwd, Arguments: json.RawMessage(o.Args)})
	if errors.Is(err, toolapi.ErrUnknownTool) {
		return cli.Exit(fmt.Sprintf("unknown tool %q (the tools are read, write and edit)", o.Tool), exitUsage)
	}
	return printResult(res.Text, res.IsError, res, o.JSON)
}

// openService opens the store, policy and tools of one workspace.
func openService(backing, stateDir string, withPolicy bool) (*toolapi.Service, func(), error) {
	abs, stateDir, err := execWorkspace(backing, stateDir)
	if err != nil {
		return nil, nil, err
	}
	if stateDir, err = daemon.PrepareStateDir(stateDir); err != nil {
		return nil, nil, err
	}
	umask := currentUmask()
	store, err := versionstore.Open(abs, filepath.Join(stateDir, "index.db"), versionstore.Options{Umask: &umask})
	if err != nil {
		return nil, nil, err
	}
	svc, _, err := daemon.Tools(store, !withPolicy, toolapi.Config{})
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return svc, func() { store.Close() }, nil
}

// execWorkspace is the workspace's absolute path and its state directory
// (the default one unless stateDir names one).
func execWorkspace(backing, stateDir string) (string, string, error) {
	abs, err := filepath.Abs(backing)
	if err != nil {
		return "", "", err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("workspace %s is not a directory", backing)
	}
	if stateDir == "" {
		stateDir, err = daemon.DefaultStateDir(abs)
	}
	return abs, stateDir, err
}

// currentUmask reads the process umask (there is no way to read it without
// setting it) and puts it back.
func currentUmask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}
