package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"
)

func mcpCommand() *cli.Command {
	var socket, mount, actor string
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve a running mount's tools to an MCP client on stdio",
		Description: "The tools are the daemon's own: the same names, descriptions and input schemas, results as\n" +
			"text content with isError on failures and the structured value as structuredContent. The session\n" +
			"is one actor (a fresh name per session) unless --actor names one.\n\n" +
			"Claude Code: claude mcp add dshfs -- dshfs mcp --mount /mnt/ws",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "the daemon's socket", Destination: &socket},
			&cli.StringFlag{Name: "mount", Usage: "the mount point", DefaultText: "the mount holding the current directory, else the only one", Destination: &mount},
			&cli.StringFlag{Name: "actor", Usage: "actor name for this session", DefaultText: "a fresh one", Destination: &actor},
		},
		Action: func(c *cli.Context) error {
			return runMCP(c.Context, socket, mount, actor)
		},
	}
}

func runMCP(ctx context.Context, socket, mount, actor string) error {
	if err := toolapi.CheckActor(actor); err != nil {
		return cli.Exit("--actor: "+err.Error(), exitUsage)
	}
	socket, cwd, err := toolTarget(socket, mount, "")
	if err != nil {
		return err
	}
	if actor == "" {
		var b [6]byte
		rand.Read(b[:])
		actor = "mcp-" + hex.EncodeToString(b[:])
	}
	client := unixsocket.NewClient(socket)
	defs, err := client.Tools(ctx)
	if err != nil {
		return daemonError(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "dshfs", Version: version}, nil)
	for _, d := range defs {
		server.AddTool(&mcp.Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema},
			toolHandler(client, d.Name, actor, cwd))
	}
	if err := server.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	return nil
}

// toolHandler forwards one MCP tool call to the daemon.
func toolHandler(client *unixsocket.Client, name, actor, cwd string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		res, err := client.Call(ctx, name, unixsocket.ToolRequest{Actor: actor, Cwd: cwd, Arguments: args})
		if err != nil {
			// The daemon is down or refused the request: a failed tool
			// call the model can read, as MCP asks, not a protocol error.
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Error: " + err.Error()}}, IsError: true}, nil
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}, IsError: res.IsError}
		if len(res.Value) > 0 {
			out.StructuredContent = res.Value
		}
		if name == toolapi.ToolReadImage && !res.IsError {
			if err := attachImage(out, res.Value); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// attachImage adds the image of a read_image value as an MCP image block.
// The structured value keeps everything but the bytes, which the block
// carries: the image is not sent twice.
func attachImage(out *mcp.CallToolResult, value json.RawMessage) error {
	var img struct {
		MediaType string `json:"media_type"`
		Data      []byte `json:"data"`
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(value, &img); err != nil {
		return fmt.Errorf("read_image value: %w", err)
	}
	if err := json.Unmarshal(value, &fields); err != nil {
		return fmt.Errorf("read_image value: %w", err)
	}
	delete(fields, "data")
	out.Content = append(out.Content, &mcp.ImageContent{Data: img.Data, MIMEType: img.MediaType})
	out.StructuredContent = fields
	return nil
}
