// Package mcptools owns the MCP face of the tools: each toolapi tool as an
// MCP tool (name, title, description, input schema, hints), and each result
// as what the model reads — the tool's text as one text block, read_image's
// image as one image block, and structuredContent only when a program asks
// for it. Harnesses (Claude Code, Codex, OpenCode) hand the model
// structuredContent in place of the text whenever a result has it, so by
// default there is none.
//
// It serves sessions with the official MCP Go SDK over whatever carries
// them, calling the tools through a CallFunc: in the daemon, the tools
// themselves; in `dshfs mcp`, the daemon's socket, and with --branch-tools
// its branch routes too (WithBranches). It never touches files and decides
// nothing a tool may do.
package mcptools

import (
	"context"
	"encoding/json"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Outcome is one tool call's result as mcptools needs it.
type Outcome struct {
	Text    string
	IsError bool
	// Image is what read_image read, sent as an image block.
	Image *Image
	// Value is the structured value, without an image's bytes; it is sent
	// only with Options.Structured.
	Value any
}

// Image is an image block's content.
type Image struct {
	MediaType string
	Data      []byte
}

// CallFunc runs one tool call. An error means the call could not be made
// (the daemon is down, say); it reaches the model as a failed call.
type CallFunc func(ctx context.Context, tool string, args json.RawMessage) (Outcome, error)

// Options configure a server.
type Options struct {
	// Version is the implementation version the server reports.
	Version string
	// Structured sends each result's value as structuredContent too: for
	// programs, never for a model.
	Structured bool
	// OnInitialized, if set, is told the client's initialize parameters
	// once the handshake is done.
	OnInitialized func(*mcp.InitializeParams)
}

// NewServer returns an MCP server of the tools defs, each call run by call.
func NewServer(defs []toolapi.ToolDef, call CallFunc, opts Options) *mcp.Server {
	var sopts *mcp.ServerOptions
	if opts.OnInitialized != nil {
		sopts = &mcp.ServerOptions{InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			opts.OnInitialized(req.Session.InitializeParams())
		}}
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "dshfs", Version: opts.Version}, sopts)
	for _, d := range defs {
		server.AddTool(Tool(d), handler(d.Name, call, opts.Structured))
	}
	return server
}

// Tool is a tool definition as MCP carries it.
func Tool(d toolapi.ToolDef) *mcp.Tool {
	destructive, openWorld := d.Annotations.Destructive, d.Annotations.OpenWorld
	return &mcp.Tool{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: d.InputSchema,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    d.Annotations.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  d.Annotations.Idempotent,
			OpenWorldHint:   &openWorld,
		}}
}

// handler runs one tool's calls and shapes their results.
func handler(name string, call CallFunc, structured bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		o, err := call(ctx, name, args)
		if err != nil {
			// A failed call the model can read, as MCP asks, not a
			// protocol error.
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Error: " + err.Error()}}, IsError: true}, nil
		}
		return Result(o, structured), nil
	}
}

// Result is the MCP result of an outcome: its text as one text block, its
// image as an image block, and its value only if structured.
func Result(o Outcome, structured bool) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: o.Text}}, IsError: o.IsError}
	if o.Image != nil {
		out.Content = append(out.Content, &mcp.ImageContent{Data: o.Image.Data, MIMEType: o.Image.MediaType})
	}
	if structured && o.Value != nil {
		out.StructuredContent = o.Value
	}
	return out
}
