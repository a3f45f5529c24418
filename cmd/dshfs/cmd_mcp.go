package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"
)

// mcpOptions are the flags of `dshfs mcp`.
type mcpOptions struct {
	Socket, Mount, Actor string
	// Structured adds each result's value as structuredContent. Harnesses
	// hand the model structuredContent in place of the text when a result
	// has it, so it is for programs, not models.
	Structured bool
}

func mcpCommand() *cli.Command {
	var o mcpOptions
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve a running mount's tools to an MCP client on stdio",
		Description: "The tools are the daemon's own: the same names, descriptions and input schemas. Each result\n" +
			"is exactly the text the model is meant to read, as one text block (read_image adds the image as\n" +
			"an image block), with isError on failures. The session is one actor (a fresh name per session)\n" +
			"unless --actor names one.\n\n" +
			"--structured-content also sends each result's value (versions, line numbers) as\n" +
			"structuredContent. Do not use it with a model: Claude Code, Codex and OpenCode hand the model\n" +
			"structuredContent instead of the text when a result has it.\n\n" +
			"Claude Code: claude mcp add dshfs -- dshfs mcp --mount /mnt/ws",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "the daemon's socket", Destination: &o.Socket},
			&cli.StringFlag{Name: "mount", Usage: "the mount point (default: the mount holding the current directory)", Destination: &o.Mount},
			&cli.StringFlag{Name: "actor", Usage: "actor name for this session (default: a fresh one)", Destination: &o.Actor},
			&cli.BoolFlag{Name: "structured-content", Usage: "also send each result's value as structuredContent (for programs: harnesses show it to the model instead of the text)", Destination: &o.Structured},
		},
		Action: func(c *cli.Context) error {
			return runMCP(c.Context, o)
		},
	}
}

func runMCP(ctx context.Context, o mcpOptions) error {
	socket, mount, actor := o.Socket, o.Mount, o.Actor
	if err := toolapi.CheckActor(actor); err != nil {
		return cli.Exit("--actor: "+err.Error(), exitUsage)
	}
	wd, _ := os.Getwd()
	wd = absDir(wd)
	cwd := ""
	if socket == "" {
		where := wd
		if mount != "" {
			where = absDir(mount)
		}
		rec, ok := findMount(where)
		if !ok {
			return cli.Exit(fmt.Sprintf("no running dshfs mount holds %s (pass --mount or --socket)", where), exitFailure)
		}
		socket = rec.Socket
		if mount == "" {
			cwd = wd
		}
	}
	if actor == "" {
		var b [6]byte
		rand.Read(b[:])
		actor = "mcp-" + hex.EncodeToString(b[:])
	}
	client := unixsocket.NewClient(socket)
	defs, err := client.Tools(ctx)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "dshfs", Version: version}, nil)
	for _, d := range defs {
		server.AddTool(mcpTool(d), toolHandler(client, d.Name, actor, cwd, o.Structured))
	}
	if err := server.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	return nil
}

// mcpTool is a tool definition as MCP carries it.
func mcpTool(d unixsocket.ToolDef) *mcp.Tool {
	destructive, openWorld := d.Annotations.Destructive, d.Annotations.OpenWorld
	return &mcp.Tool{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: d.InputSchema,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    d.Annotations.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  d.Annotations.Idempotent,
			OpenWorldHint:   &openWorld,
		}}
}

// toolHandler forwards one MCP tool call to the daemon. The result is what
// the model reads: the daemon's text as one text block, and for read_image
// the image as an image block.
func toolHandler(client *unixsocket.Client, name, actor, cwd string, structured bool) mcp.ToolHandler {
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
		if structured && len(res.Value) > 0 {
			out.StructuredContent = res.Value
		}
		if name == toolapi.ToolReadImage && !res.IsError {
			if err := attachImage(out, res.Value, structured); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// attachImage adds the image of a read_image value as an MCP image block.
// A structured value, if asked for, keeps everything but the bytes, which
// the block carries: the image is not sent twice.
func attachImage(out *mcp.CallToolResult, value json.RawMessage, structured bool) error {
	var img struct {
		MediaType string `json:"media_type"`
		Data      []byte `json:"data"`
	}
	if err := json.Unmarshal(value, &img); err != nil {
		return fmt.Errorf("read_image value: %w", err)
	}
	out.Content = append(out.Content, &mcp.ImageContent{Data: img.Data, MIMEType: img.MediaType})
	if structured {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(value, &fields); err != nil {
			return fmt.Errorf("read_image value: %w", err)
		}
		delete(fields, "data")
		out.StructuredContent = fields
	}
	return nil
}
