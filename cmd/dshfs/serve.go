package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/mcptools"
	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveSocket serves the tools of a mounted workspace on a socket in its
// state directory, and registers the mount so that `dshfs call` run inside
// it finds the socket without flags. The returned function stops both.
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
	socket := filepath.Join(o.StateDir, "dshfs.sock")
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
	reg, err := register(mountRecord{MountPoint: mnt, Backing: backing, Socket: socket, StateDir: o.StateDir, Pid: os.Getpid()})
	if err != nil {
		log.Warn("register mount", "err", err)
	}
	stopForgetting := func() {}
	if pol != nil {
		stopForgetting = forgetIdleActors(pol, o.ForgetActors, log)
	}
	return socket, func() {
		stopForgetting()
		l.Close()
		if reg != "" {
			os.Remove(reg)
		}
	}, nil
}

// mcpSessions serves the MCP sessions `dshfs mcp` hands the daemon, calling
// the tools in this process.
func mcpSessions(svc *toolapi.Service) func(context.Context, unixsocket.MCPSession) error {
	return func(ctx context.Context, s unixsocket.MCPSession) error {
		server := mcptools.NewServer(svc.Tools(), mcptools.FromService(svc, s.Actor, s.Cwd), mcptools.Options{
			Version:    version,
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

// mountRecord is what a running mount registers for the CLI to find it.
type mountRecord struct {
	MountPoint string `json:"mount_point"`
	Backing    string `json:"backing"`
	Socket     string `json:"socket"`
	StateDir   string `json:"state_dir"`
	Pid        int    `json:"pid"`
}

// registryDir holds one record per running mount of this user.
func registryDir() (string, error) {
	base, err := userStateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "dshfs", "mounts"), nil
}

func register(r mountRecord) (string, error) {
	dir, err := registryDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	b, _ := json.Marshal(r)
	// Named for the whole state directory: two --state directories may
	// share their last element.
	sum := sha256.Sum256([]byte(r.StateDir))
	path := filepath.Join(dir, filepath.Base(r.StateDir)+"-"+hex.EncodeToString(sum[:6])+".json")
	return path, os.WriteFile(path, b, 0o600)
}

// findMount returns the registered mount containing dir, through its mount
// point or its backing directory (the deepest first).
func findMount(dir string) (mountRecord, bool) {
	var best mountRecord
	bestLen := 0
	for _, r := range runningMounts() {
		for _, root := range []string{r.MountPoint, r.Backing} {
			if rel, err := filepath.Rel(root, dir); err == nil && (rel == "." || filepath.IsLocal(rel)) && len(root) > bestLen {
				best, bestLen = r, len(root)
			}
		}
	}
	return best, best.Socket != ""
}
