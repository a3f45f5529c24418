package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

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
		Description: "Finds the mount from the current directory (or --mount / --socket). Exit status 1 when the\n" +
			"tool returns an error. '-' reads the arguments from standard input: a command line holds at most\n" +
			"128 KiB in one argument, a file's content may need more.\n\n" +
			"Example: dshfs call --actor me read '{\"file_path\":\"main.go\"}'",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "the daemon's socket", Destination: &o.Socket},
			&cli.StringFlag{Name: "mount", Usage: "the mount point (default: the mount holding the current directory)", Destination: &o.Mount},
			&cli.StringFlag{Name: "actor", Usage: "actor whose observations the call uses", Destination: &o.Actor},
			&cli.StringFlag{Name: "cwd", Usage: "directory relative paths resolve against (default: the current directory inside the mount)", Destination: &o.Cwd},
			&cli.BoolFlag{Name: "json", Usage: "print the whole result as JSON", Destination: &o.JSON},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("call takes a tool name and its JSON arguments, e.g. call read '{\"file_path\":\"a.txt\"}'", exitUsage)
			}
			args := []byte(c.Args().Get(1))
			if c.Args().Get(1) == "-" {
				var err error
				if args, err = io.ReadAll(os.Stdin); err != nil {
					return cli.Exit("read the arguments from standard input: "+err.Error(), exitFailure)
				}
			}
			return runCall(c.Context, o, c.Args().Get(0), args)
		},
	}
}

func runCall(ctx context.Context, o callOptions, tool string, args []byte) error {
	if !json.Valid(args) {
		return cli.Exit("the arguments are not valid JSON", exitUsage)
	}
	wd, _ := os.Getwd()
	wd = absDir(wd)
	if o.Socket == "" {
		where := wd
		if o.Mount != "" {
			where = absDir(o.Mount)
		}
		rec, ok := findMount(where)
		if !ok {
			return cli.Exit(fmt.Sprintf("no running dshfs mount holds %s (pass --mount or --socket)", where), exitNotFound)
		}
		o.Socket = rec.Socket
		if o.Cwd == "" && o.Mount == "" {
			o.Cwd = wd
		}
	}
	res, err := unixsocket.NewClient(o.Socket).Call(ctx, tool, unixsocket.ToolRequest{Actor: o.Actor, Cwd: o.Cwd, Arguments: json.RawMessage(args)})
	var apiErr *unixsocket.APIError
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
		return cli.Exit(apiErr.Message+"; dshfs tools lists the tools", exitUsage)
	}
	if err != nil {
		return daemonError(err)
	}
	return printResult(res.Text, res.IsError, res, o.JSON)
}
