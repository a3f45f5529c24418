package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/dshfs/dshfs/mcptools"
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
	// BranchTools adds the branch tools, for a model that orchestrates
	// agents on branches; this process then serves the session itself.
	BranchTools bool
}

func mcpCommand() *cli.Command {
	var o mcpOptions
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve a running mount's tools to an MCP client on stdio",
		Description: "The tools are the daemon's own: the same names, descriptions and input schemas. Each result\n" +
			"is exactly the text the model is meant to read, as one text block (read_image adds the image as\n" +
			"an image block), with isError on failures. The session is one actor, named after the client and\n" +
			"numbered to be the session's own (claude-code-1, codex-2), unless --actor names one.\n\n" +
			"--structured-content also sends each result's value (versions, line numbers) as\n" +
			"structuredContent. Do not use it with a model: Claude Code, Codex and OpenCode hand the model\n" +
			"structuredContent instead of the text when a result has it.\n\n" +
			"--branch-tools adds branch_list, branch_diff, branch_merge and branch_new, for a model that\n" +
			"starts agents on branches and merges their work (docs/branches.md).\n\n" +
			"Claude Code: claude mcp add dshfs -- dshfs mcp --mount /mnt/ws",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "the daemon's socket", Destination: &o.Socket},
			&cli.StringFlag{Name: "mount", Usage: "the mount point", DefaultText: "the mount holding the current directory, else the only one", Destination: &o.Mount},
			&cli.StringFlag{Name: "actor", Usage: "actor name for this session", DefaultText: "the client's name, numbered", Destination: &o.Actor},
			&cli.BoolFlag{Name: "branch-tools", Usage: "also serve the tools that list, preview, merge and make branches (for an orchestrating model)", Destination: &o.BranchTools},
			&cli.BoolFlag{Name: "structured-content", Usage: "also send each result's value as structuredContent (for programs: harnesses show it to the model instead of the text)", Destination: &o.Structured},
		},
		Action: func(c *cli.Context) error {
			return runMCP(c.Context, o)
		},
	}
}

func runMCP(ctx context.Context, o mcpOptions) error {
	if err := toolapi.CheckActor(o.Actor); err != nil {
		return cli.Exit("--actor: "+err.Error(), exitUsage)
	}
	client, cwd, err := toolTarget(ctx, o.Socket, o.Mount, "")
	if err != nil {
		return err
	}
	defs, err := client.Tools(ctx)
	if err != nil {
		return daemonError(err)
	}
	// Without --actor the daemon names the session's actor after the
	// client once it initializes; a fresh name stands in until then (and
	// for a daemon that does not name actors).
	req := unixsocket.MCPRequest{Actor: o.Actor, Cwd: cwd, StructuredContent: o.Structured, NameActor: o.Actor == ""}
	if req.NameActor {
		req.Actor = freshActor("mcp")
	} else {
		registerHarness(ctx, client, req.Actor)
	}
	if o.BranchTools {
		// The daemon serves sessions of the workspace's tools alone: this
		// process serves this one, relaying each call.
		return serveMCP(ctx, client, defs, req, &mcp.ServerSessionState{}, true)
	}
	state, err := handOver(ctx, client, &req)
	if err != nil {
		return daemonError(err)
	}
	if state == nil {
		return nil // the daemon served the session to its end
	}
	return serveMCP(ctx, client, defs, req, state, false)
}

// registerHarness names actor as the writer of whatever the harness that
// started this session writes through the mount: it runs the agent's shell
// commands as its children.
func registerHarness(ctx context.Context, client *unixsocket.Client, actor string) {
	if err := client.RegisterProcess(ctx, actor, os.Getppid()); err != nil {
		fmt.Fprintf(os.Stderr, "dshfs mcp: writes by the harness's processes will not name %s: %v\n", actor, err)
	}
}

// freshActor is a fresh actor name for a session of client, for when no
// daemon numbers it: unique by chance.
func freshActor(client string) string {
	var b [6]byte
	rand.Read(b[:])
	return toolapi.ActorBase(client) + "-" + hex.EncodeToString(b[:])
}

// handOver gives this process's standard input and output to the daemon,
// which serves the MCP session itself: a call then costs one process hop,
// as with any MCP server, not two. It returns once the session is over
// (nil state), or with the state to go on from if the daemon goes away
// first or does not take sessions. Once the daemon names the session's
// actor, req holds it, and the harness is registered for it.
func handOver(ctx context.Context, client *unixsocket.Client, req *unixsocket.MCPRequest) (*mcp.ServerSessionState, error) {
	ctl, err := client.OpenMCP(ctx, *req, os.Stdin, os.Stdout)
	if errors.Is(err, unixsocket.ErrNoMCP) {
		return &mcp.ServerSessionState{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	state := &mcp.ServerSessionState{}
	for {
		e, err := ctl.Next()
		switch {
		case err != nil, e.Stopping:
			// The session is not over: go on serving it here, against a
			// daemon that may come back. The daemon left the streams
			// non-blocking.
			syscall.SetNonblock(int(os.Stdin.Fd()), false)
			syscall.SetNonblock(int(os.Stdout.Fd()), false)
			return state, nil
		case e.Done:
			return nil, nil
		case e.Initialized != nil:
			var p mcp.InitializeParams
			if json.Unmarshal(e.Initialized, &p) == nil {
				state = &mcp.ServerSessionState{InitializeParams: &p, InitializedParams: &mcp.InitializedParams{}}
			}
			if req.NameActor {
				// The daemon named it (one that does not kept req.Actor).
				req.Actor, req.NameActor = cmp.Or(e.Actor, req.Actor), false
				registerHarness(ctx, client, req.Actor)
			}
		}
	}
}

// serveMCP serves the session in this process, each call relayed over the
// socket; state is where the session stands (zero: not yet initialized).
// With branchTools it serves the branch tools too.
func serveMCP(ctx context.Context, client *unixsocket.Client, defs []unixsocket.ToolDef, req unixsocket.MCPRequest, state *mcp.ServerSessionState, branchTools bool) error {
	actor := mcptools.FixedActor(req.Actor)
	if req.NameActor {
		actor = mcptools.NamedActor(func(name string) string {
			a := freshActor(name)
			registerHarness(ctx, client, a)
			return a
		})
	}
	call := mcptools.FromClient(client, actor, req.Cwd)
	if branchTools {
		defs = append(slices.Clip(defs), toolapi.BranchDefinitions()...)
		call = mcptools.WithBranches(call, mcptools.BranchesOf(client))
	}
	server := mcptools.NewServer(defs, call,
		mcptools.Options{Version: buildVersion(), Structured: req.StructuredContent,
			OnInitialized: func(p *mcp.InitializeParams) { actor.Name(mcptools.ClientName(p)) }})
	var opts *mcp.ServerSessionOptions
	if state.InitializeParams != nil {
		opts = &mcp.ServerSessionOptions{State: state}
	}
	ss, err := server.Connect(ctx, mcptools.Transport(os.Stdin, nopCloser{os.Stdout}), opts)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	if err := ss.Wait(); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return cli.Exit(err.Error(), exitFailure)
	}
	return nil
}

// nopCloser is standard output as the session's writer: the session ending
// does not close it.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
