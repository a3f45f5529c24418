package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/dshfs/dshfs/daemon"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/urfave/cli/v2"
)

// callOptions are the flags of `dshfs call`.
type callOptions struct {
	Socket string
	Mount  string
	Actor  string
	Cwd    string
	JSON   bool
}

func callCommand() *cli.Command {
	var o callOptions
	return &cli.Command{
		Name:      "call",
		Usage:     "call a tool of a running mount and print exactly what the model sees",
		ArgsUsage: "TOOL 'JSON-ARGUMENTS' | TOOL -",
		Description: "Finds the mount from --mount, --socket, an absolute file_path, the current directory, or\n" +
			"else the only mount on the machine. Exit status 1 when the tool returns an error, 4 when no mount\n" +
			"is found, 5 when its daemon cannot be reached. '-' reads the arguments from standard input: a\n" +
			"command line holds at most 128 KiB in one argument, a file's content may need more.\n\n" +
			"Example: dshfs call --actor me read '{\"file_path\":\"main.go\"}'",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "the daemon's socket", Destination: &o.Socket},
			&cli.StringFlag{Name: "mount", Usage: "the mount point", DefaultText: "the mount holding file_path or the current directory, else the only one", Destination: &o.Mount},
			&cli.StringFlag{Name: "actor", Usage: "actor whose observations the call uses", Destination: &o.Actor},
			&cli.StringFlag{Name: "cwd", Usage: "directory relative paths resolve against", DefaultText: "the current directory if inside the mount, else the mount point", Destination: &o.Cwd},
			&cli.BoolFlag{Name: "json", Usage: "print the whole result as JSON", Destination: &o.JSON},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("call takes a tool name and its JSON arguments, e.g. call read '{\"file_path\":\"a.txt\"}'", exitUsage)
			}
			args, err := callArguments(c.Args().Get(1))
			if err != nil {
				return err
			}
			return runCall(c.Context, o, c.Args().Get(0), args)
		},
	}
}

// callArguments is call's JSON argument: as given, or standard input for
// "-".
func callArguments(arg string) ([]byte, error) {
	if arg != "-" {
		return []byte(arg), nil
	}
	args, err := io.ReadAll(os.Stdin)
	if err != nil {
		return nil, cli.Exit("read the arguments from standard input: "+err.Error(), exitFailure)
	}
	return args, nil
}

func runCall(ctx context.Context, o callOptions, tool string, args []byte) error {
	if !json.Valid(args) {
		return cli.Exit("the arguments are not valid JSON", exitUsage)
	}
	var target struct {
		FilePath string `json:"file_path"`
	}
	json.Unmarshal(args, &target)
	client, cwd, err := toolTarget(ctx, o.Socket, o.Mount, target.FilePath)
	if err != nil {
		return err
	}
	if o.Cwd == "" {
		o.Cwd = cwd
	}
	res, err := client.Call(ctx, tool, unixsocket.ToolRequest{Actor: o.Actor, Cwd: o.Cwd, Arguments: json.RawMessage(args)})
	var apiErr *unixsocket.APIError
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
		return cli.Exit(apiErr.Message+"; dshfs tools lists the tools", exitUsage)
	}
	if err != nil {
		return daemonError(err)
	}
	return printResult(res.Text, res.IsError, res, o.JSON)
}

// toolTarget is the client a tool call goes to and the cwd it carries:
// --socket as given (whoever serves it); else the checked daemon of the
// mount of --mount, of an absolute file_path, of the working directory, or
// the caller's only one. The working directory is the call's cwd when it is
// inside that mount (its mount point or backing directory) and no --mount
// names it.
func toolTarget(ctx context.Context, socket, mount, filePath string) (*unixsocket.Client, string, error) {
	if socket != "" {
		return unixsocket.NewClient(socket), "", nil
	}
	var q daemon.Query
	switch {
	case mount != "":
		q.Mount = absDir(mount)
	case filepath.IsAbs(filePath):
		q.Path = absPath(filePath)
	}
	d, err := locate(ctx, q)
	if err != nil {
		return nil, "", err
	}
	cwd := ""
	if wd := workingDir(); mount == "" && d.Holds(wd) {
		cwd = wd
	}
	return d.Client, cwd, nil
}
