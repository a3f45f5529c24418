// Command dshfs is the workspace filesystem for AI coding agents: it versions
// every file by content hash and serves compare-and-swap read, write and edit
// tools. Each subcommand lives in its own file, cmd_<verb>.go.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// Exit codes, documented in --help.
const (
	exitOK        = 0
	exitToolError = 1 // a tool call returned an error result
	exitUsage     = 2 // bad flags or arguments
	exitFailure   = 3 // the operation could not be carried out
)

func newApp() *cli.App {
	return &cli.App{
		Name:    "dshfs",
		Usage:   "a versioned workspace filesystem for AI coding agents",
		Version: buildVersion(),
		Description: "Every file in the workspace has a content-hash version (BLAKE3). The read, write and edit\n" +
			"tools compare-and-swap against the version an agent last saw, so no agent write lands on a\n" +
			"version it did not see.\n\n" +
			"Exit status: 0 success; 1 a tool call returned an error; 2 usage error; 3 failure.",
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
		},
		ExitErrHandler: func(c *cli.Context, err error) {},
	}
}

func main() {
	os.Exit(run(os.Args))
}

func run(args []string) int {
	app := newApp()
	err := app.Run(hoistFlags(app, args))
	if err == nil {
		return exitOK
	}
	if ec, ok := err.(cli.ExitCoder); ok {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(os.Stderr, "dshfs:", msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "dshfs:", err)
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
