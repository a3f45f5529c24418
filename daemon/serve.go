package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/mcptools"
	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// drainTimeout bounds how long a stopping daemon waits for the calls under
// way and the MCP sessions' calls before it cancels them.
const drainTimeout = 10 * time.Second

// serve serves the tools of the mounted workspace on the socket in its
// state directory (the mount's root names it: see registry.go). The
// returned function stops serving: it stops accepting, lets the calls
// under way finish (drainTimeout), and returns once they are over.
func (m *mount) serve() (func(), error) {
	svc, pol, err := Tools(m.store, m.cfg.NoPolicy, toolapi.Config{MountPoint: m.cfg.MountPoint, MaxImageBytes: m.cfg.MaxImageBytes,
		OtherMountPoints: func() []string { return fusefs.OtherMountPoints(m.cfg.MountPoint) }})
	if err != nil {
		return nil, err
	}
	m.socket = socketPath(m.cfg.StateDir)
	srv := m.server(svc, pol)
	l, err := unixsocket.Listen(m.socket)
	if err != nil {
		return nil, err
	}
	go func() {
		if err := srv.Serve(l); err != nil {
			m.log.Error("serve socket", "err", err)
		}
	}()
	stopForgetting := func() {}
	if pol != nil {
		stopForgetting = forgetIdleActors(pol, m.cfg.ForgetActors, m.log)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				m.log.Warn("calls cut off at unmount", "err", err, "after", drainTimeout)
			}
			stopForgetting()
		})
	}, nil
}

// server is the socket's server of svc's tools, the mount's status and
// MCP sessions.
func (m *mount) server(svc *toolapi.Service, pol *policy.Policy) *unixsocket.Server {
	return unixsocket.NewServer(unixsocket.Config{
		Tools:           svc,
		Logger:          m.log,
		Status:          m.status(pol),
		Mount:           unixsocket.Status{MountPoint: m.cfg.MountPoint, Backing: m.cfg.Backing, Socket: m.socket, StateDir: m.cfg.StateDir},
		Store:           m.store,
		MCP:             mcpSessions(svc, m.cfg.Version, newActorNames(pol)),
		RegisterProcess: registerWith(m.fsys.Actors()),
		Branches:        m.branchesAPI(),
	})
}

// branchesAPI is the socket's side of the branches (nil in a branch's own
// mount: branches of branches are not served).
func (m *mount) branchesAPI() unixsocket.Branches {
	if m.branches == nil {
		return nil
	}
	return m.branches
}

// registerWith registers a process with actors for the socket's peer: its
// own processes only, any if it is root (fusefs.Actors.Register).
func registerWith(actors *fusefs.Actors) func(actor string, pid int, peerUID uint32) error {
	return func(actor string, pid int, peerUID uint32) error { return actors.Register(pid, actor, peerUID) }
}

// Tools are the tools over store, with the read-before-write policy (its
// observations kept in the store's index) unless noPolicy; pol is nil
// without it.
func Tools(store *versionstore.Store, noPolicy bool, cfg toolapi.Config) (svc *toolapi.Service, pol *policy.Policy, err error) {
	if !noPolicy {
		if pol, err = policy.New(store.Observations(), policy.Options{}); err != nil {
			return nil, nil, err
		}
	}
	svc, err = toolapi.New(store, pol, cfg)
	return svc, pol, err
}

// status is what the socket's status route reports.
func (m *mount) status(pol *policy.Policy) func() unixsocket.Status {
	return func() unixsocket.Status {
		st := unixsocket.Status{MountPoint: m.cfg.MountPoint, Backing: m.cfg.Backing, Socket: m.socket, StateDir: m.cfg.StateDir}
		if s, err := m.store.Stats(); err != nil {
			m.log.Error("count the index", "err", err) // not "no files": the status cannot say
		} else {
			st.FilesIndexed, st.DirtyFiles = s.Files, s.Writing
		}
		rep, ok, err := m.store.Salvaged()
		if err != nil {
			m.log.Error("read the index's salvage report", "err", err)
		} else if ok {
			st.IndexSalvage = &rep
		}
		if pol != nil {
			st.Actors = actorSummary(pol)
		}
		if m.remote != nil {
			rs := m.remote.Status()
			st.Remote = &rs
		}
		if m.fsys != nil {
			st.Transport, st.TransportNote = m.fsys.Transport()
		}
		return st
	}
}

// mcpSessions serves the MCP sessions `dshfs mcp` hands the daemon, calling
// the tools in this process; names names the actors of those that ask.
func mcpSessions(svc *toolapi.Service, version string, names *actorNames) func(context.Context, unixsocket.MCPSession) error {
	return func(ctx context.Context, s unixsocket.MCPSession) error {
		actor := mcptools.FixedActor(s.Actor)
		if s.NameActor {
			actor = mcptools.NamedActor(names.name)
		}
		calls := &sessionCalls{}
		server := mcptools.NewServer(svc.ToolsIn(s.Cwd), calls.wrap(mcptools.FromService(svc, actor, s.Cwd)), mcptools.Options{
			Version:    version,
			Structured: s.StructuredContent,
			OnInitialized: func(p *mcp.InitializeParams) {
				name := actor.Name(mcptools.ClientName(p))
				if b, err := json.Marshal(p); err == nil {
					s.Initialized(b, name)
				}
			},
		})
		ss, err := server.Connect(ctx, mcptools.Transport(s.In, s.Out), nil)
		if err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, func() { ss.Close() })
		defer stop()
		ended := make(chan struct{})
		defer close(ended)
		go func() {
			select {
			case <-s.Stop: // the daemon is stopping: finish the calls under way, then end
				calls.finish()
				ss.Close()
			case <-ended:
			}
		}()
		ss.Wait() // the client closed its end, or the daemon ended the session
		return nil
	}
}

// sessionCalls are an MCP session's tool calls under way; finish refuses
// new ones and waits for those.
type sessionCalls struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (c *sessionCalls) wrap(call mcptools.CallFunc) mcptools.CallFunc {
	return func(ctx context.Context, tool string, args json.RawMessage) (mcptools.Outcome, error) {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return mcptools.Outcome{}, toolapi.ErrStopping
		}
		c.wg.Add(1)
		c.mu.Unlock()
		defer c.wg.Done()
		return call(ctx, tool, args)
	}
}

func (c *sessionCalls) finish() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
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
		idle = DefaultForgetActors
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
