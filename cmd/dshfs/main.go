// Command dshfs is the workspace filesystem for AI coding agents: it versions
// every file by content hash and serves compare-and-swap read, write and edit
// tools. Each subcommand lives in its own file, cmd_<verb>.go.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/dshfs/dshfs/internal/quote"
	"github.com/urfave/cli/v2"
)

// Exit codes, documented in --help and docs/using.md. Each means one thing.
const (
	exitOK          = 0
	exitToolError   = 1 // a tool call returned an error result; a restore or rewind met a conflict
	exitUsage       = 2 // bad flags or arguments
	exitFailure     = 3 // the operation could not be carried out
	exitNotFound    = 4 // no such mount, file, version or checkpoint, or the version's bytes are not kept
	exitUnreachable = 5 // the mount was found, but its daemon cannot be reached
)

const exitStatusHelp = "Exit status: 0 success; 1 a tool call returned an error (or a restore or rewind met a\n" +
	"conflict); 2 usage error; 3 failure; 4 not found (no such mount, file, version or checkpoint,\n" +
	"or the version's bytes are not kept); 5 the mount's daemon cannot be reached."

func newApp() *cli.App {
	app := &cli.App{
		Name:    "dshfs",
		Usage:   "a versioned workspace filesystem for AI coding agents",
		Version: buildVersion(),
		Description: "Every file in the workspace has a content-hash version (BLAKE3). The read, write and edit\n" +
			"tools compare-and-swap against the version an agent last saw, so no agent write lands on a\n" +
			"version it did not see.\n\n" + exitStatusHelp,
		Commands: []*cli.Command{
			mountCommand(),
			unmountCommand(),
			statusCommand(),
			logCommand(),
			showCommand(),
			diffCommand(),
			restoreCommand(),
			checkpointCommand(),
			checkpointsCommand(),
			rewindCommand(),
			gcCommand(),
			callCommand(),
			mcpCommand(),
			toolsCommand(),
			execCommand(),
			branchCommand(),
		},
		ExitErrHandler: func(c *cli.Context, err error) {},
	}
	for _, c := range app.Commands {
		c.Action = failureUnlessCoded(c.Action)
	}
	return app
}

// failureUnlessCoded gives an action's uncoded error the failure status:
// only flag parsing, before any action runs, returns one that means usage.
func failureUnlessCoded(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		err := action(c)
		if _, ok := err.(cli.ExitCoder); err != nil && !ok {
			return cli.Exit(err.Error(), exitFailure)
		}
		return err
	}
}

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	app := newApp()
	unknown := ""
	app.CommandNotFound = func(c *cli.Context, name string) { unknown = name }
	err := app.Run(hoistFlags(app, args))
	if unknown != "" {
		fmt.Fprintf(os.Stderr, "dshfs: no command %q; dshfs help lists the commands\n", unknown)
		return exitUsage
	}
	if err == nil {
		return exitOK
	}
	// An error may echo a name the daemon or the system did not quote (a
	// path in a store's message, a file in a mount point): its control
	// characters are escaped so it cannot rewrite the terminal.
	if ec, ok := err.(cli.ExitCoder); ok {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "dshfs:", quote.Text(msg))
		}
		return ec.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "dshfs:", quote.Text(err.Error()))
	return exitUsage
}

// printResult prints a tool result — exactly the model's text, or the whole
// result as JSON — and turns a tool error into exit status 1.
func printResult(text string, isError bool, whole any, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		enc.Encode(whole)
	} else {
		fmt.Println(text)
	}
	if isError {
		return cli.Exit("", exitToolError)
	}
	return nil
}
