package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/mcptools"
	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveSocket serves the tools of a mounted workspace on the socket in its
// state directory (the mount's root names it: see registry.go). The
// returned function stops serving.
func serveSocket(store *versionstore.Store, fsys *fusefs.FS, o mountOptions, backing, mnt string, log *slog.Logger) (string, func(), error) {
	var pol *policy.Policy
	if !o.NoPolicy {
		var err error
		if pol, err = policy.New(store.DB(), policy.Options{}); err != nil {
			return "", nil, err
		}
	}
	svc, err := toolapi.New(store, pol, toolapi.Config{MountPoint: mnt, MaxImageBytes: o.MaxImageSize})
	if err != nil {
		return "", nil, err
	}
	socket := socketPath(o.StateDir)
	srv := unixsocket.NewServer(unixsocket.Config{
		Tools:  svc,
		Logger: log,
		Status: func() unixsocket.Status {
			st := unixsocket.Status{MountPoint: mnt, Backing: backing, Socket: socket, StateDir: o.StateDir}
			if s, err := store.Stats(); err == nil {
				st.FilesIndexed, st.DirtyFiles = s.Files, s.Dirty
			}
			if pol != nil {
				st.Actors = actorSummary(pol)
			}
			return st
		},
		Store:           store,
		MCP:             mcpSessions(svc),
		RegisterProcess: func(actor string, pid int) error { return fsys.Actors().Register(pid, actor) },
	})
	l, err := unixsocket.Listen(socket)
	if err != nil {
		return "", nil, err
	}
	go func() {
		if err := srv.Serve(l); err != nil {
			log.Error("serve socket", "err", err)
		}
	}()
	stopForgetting := func() {}
	if pol != nil {
		stopForgetting = forgetIdleActors(pol, o.ForgetActors, log)
	}
	return socket, func() {
		stopForgetting()
		l.Close()
	}, nil
}

// mcpSessions serves the MCP sessions `dshfs mcp` hands the daemon, calling
// the tools in this process.
func mcpSessions(svc *toolapi.Service) func(context.Context, unixsocket.MCPSession) error {
	return func(ctx context.Context, s unixsocket.MCPSession) error {
		server := mcptools.NewServer(svc.Tools(), mcptools.FromService(svc, s.Actor, s.Cwd), mcptools.Options{
			Version:    buildVersion(),
			Structured: s.StructuredContent,
			OnInitialized: func(p *mcp.InitializeParams) {
				if b, err := json.Marshal(p); err == nil {
					s.Initialized(b)
				}
			},
		})
		ss, err := server.Connect(ctx, &mcp.IOTransport{Reader: s.In, Writer: s.Out}, nil)
		if err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, func() { ss.Close() })
		defer stop()
		ss.Wait() // the client closed its end, or ctx ended the session
		return nil
	}
}

// actorSummary counts the actors and names the most recently active.
func actorSummary(pol *policy.Policy) unixsocket.ActorSummary {
	acts, _ := pol.Activity()
	return unixsocket.ActorSummary{Count: len(acts), Recent: acts[:min(len(acts), unixsocket.MaxRecentActors)]}
}

// forgetIdleActors forgets idle actors' observations now and every hour,
// until the returned function is called.
func forgetIdleActors(pol *policy.Policy, idle time.Duration, log *slog.Logger) func() {
	if idle <= 0 {
		idle = defaultForgetActors
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			if gone, err := pol.ForgetIdle(idle, maxActors); err != nil {
				log.Error("forget idle actors", "err", err)
			} else if len(gone) > 0 {
				log.Info("forgot idle actors", "count", len(gone))
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(stop); <-done }
}
