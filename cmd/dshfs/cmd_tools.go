package main

import (
	"encoding/json"
	"os"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/urfave/cli/v2"
)

func toolsCommand() *cli.Command {
	return &cli.Command{
		Name:  "tools",
		Usage: "print the model-facing tool definitions (name, description, input_schema) as JSON",
		Action: func(c *cli.Context) error {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			return enc.Encode(toolapi.Definitions(toolapi.DefaultReadLimit))
		},
	}
}
