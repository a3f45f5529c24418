package unixsocket

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
)

const (
	// DefaultMaxBody caps a request body (a write's content travels in it).
	DefaultMaxBody = 64 << 20
	// DefaultMaxConns caps the connections open at once.
	DefaultMaxConns = 1024
)

// Config wires a Server to the engine.
type Config struct {
	Tools *toolapi.Service
	// Status fills in what the server does not know itself.
	Status func() Status
	// Mount is where the daemon serves: mount point, backing directory,
	// socket and state directory. GET /v1/status?fields=mount answers it
	// alone, without Status, which reads the whole index: a client checks
	// it before every command (the daemon package's Dial).
	Mount Status
	// Store serves checkpoints, rewind and collection (nil: those routes
	// answer 404).
	Store *versionstore.Store
	// MaxBody caps request bodies (default DefaultMaxBody).
	MaxBody int64
	// CallTimeout bounds one tool call (default 5 minutes).
	CallTimeout time.Duration
	// MCP serves a session `dshfs mcp` handed over (POST /v1/mcp) until
	// it ends, its Stop channel is closed and its calls are over, or ctx
	// is done (nil: the route answers 404).
	MCP func(ctx context.Context, s MCPSession) error
	// RegisterProcess records that a process, and everything it starts,
	// acts for an actor: their writes through the mount are the actor's
	// (nil: the route answers 404). peerUID is the user of the process
	// asking (SO_PEERCRED), which may register only its own processes
	// unless it is root; where the platform does not say, the daemon's.
	RegisterProcess func(actor string, pid int, peerUID uint32) error
	// MaxConns caps the connections open at once (default
	// DefaultMaxConns): one more is answered 503 and closed (accept.go),
	// so that no number of clients can run the daemon out of descriptors.
	// Each holds a descriptor and net/http's buffers (8 KiB); a connection
	// left idle is closed after two minutes, a silent new one after ten
	// seconds.
	MaxConns int
	Logger   *slog.Logger
	// Branches serves the workspace's branches (nil: those routes answer
	// 404).
	Branches Branches
}

// Server serves the API.
type Server struct {
	cfg          Config
	start        time.Time
	ctx          context.Context // done when Serve returns or Shutdown begins: MCP sessions end
	stop         context.CancelFunc
	callCtx      context.Context // the calls' own: cancelled when Shutdown cuts them off
	cancelCalls  context.CancelFunc
	mux          *http.ServeMux
	routes       []route       // the route table
	writeTimeout time.Duration // bounds writing an answer (streamed ones clear it)
	timeouts                   // reading requests

	mu  sync.Mutex
	ops map[string]*atomic.Int64
	hs  *http.Server // Serve's (for Shutdown)
	// fresh are the connections that have not sent a request yet: no call
	// of theirs is under way, so Shutdown closes them at once.
	fresh map[net.Conn]struct{}

	draining atomic.Bool // Shutdown has begun (drain.go)
	calls    tracker     // requests being answered
	sessions tracker     // MCP sessions being served

	open     atomic.Int64  // connections accepted and not yet closed
	freed    chan struct{} // a connection closed (see accept.go)
	refusing atomic.Int64  // refusals being answered (accept.go)

	refused       int       // connections refused since refusedLogged (accept loop only)
	refusedLogged time.Time //

	releasing   atomic.Bool // a large body's memory is to go back to the OS (body.go)
	lastRelease time.Time
}

// timeouts bound reading requests: the head (from the connection's accept
// or from the first byte of a later request), the whole request, and the
// wait for the next one.
type timeouts struct{ idle, head, read time.Duration }

// maxHead caps a request's line and headers (net/http answers 431 past it).
const maxHead = 64 << 10

// NewServer returns a server for cfg.
func NewServer(cfg Config) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	s := &Server{cfg: cfg, start: time.Now(), mux: http.NewServeMux(), ops: map[string]*atomic.Int64{},
		writeTimeout: cfg.CallTimeout + time.Minute, freed: make(chan struct{}, 1),
		timeouts: timeouts{idle: 2 * time.Minute, head: 10 * time.Second, read: 2 * time.Minute}}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.callCtx, s.cancelCalls = context.WithCancel(context.Background())
	s.routes = s.routeTable()
	for _, r := range s.routes {
		s.mux.HandleFunc(r.pattern, r.handler)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s
}

// route is one entry of the route table.
type route struct {
	pattern string
	handler http.HandlerFunc
}

// routeTable is the API's routes, sorted.
func (s *Server) routeTable() []route {
	return []route{
		{"POST /v1/actors/{actor}/processes", s.registerProcess},
		{"GET /v1/branches", s.needBranches(s.branches)},
		{"POST /v1/branches", s.needBranches(s.newBranch)},
		{"DELETE /v1/branches/{name}", s.needBranches(s.dropBranch)},
		{"GET /v1/branches/{name}/diff", s.needBranches(s.branchDiff)},
		{"POST /v1/branches/{name}/merge", s.needBranches(s.mergeBranch)},
		{"GET /v1/checkpoints", s.needStore(s.checkpoints)},
		{"POST /v1/checkpoints", s.needStore(s.checkpoint)},
		{"DELETE /v1/checkpoints/{name}", s.needStore(s.removeCheckpoint)},
		{"GET /v1/diff", s.diff},
		{"POST /v1/gc", s.needStore(s.gc)},
		{"GET /v1/history", s.history},
		{"GET /v1/log", s.log},
		{"POST /v1/mcp", s.mcp},
		{"GET /v1/openapi.json", s.openAPI},
		{"POST /v1/restore", s.restore},
		{"POST /v1/rewind", s.needStore(s.rewind)},
		{"GET /v1/show", s.show},
		{"GET /v1/status", s.status},
		{"GET /v1/tools", s.tools},
		{"POST /v1/tools/{name}", s.toolCall},
	}
}

// Handler is the API with panics turned into 500s.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.calls.begin() {
			writeError(w, http.StatusServiceUnavailable, "the dshfs daemon is stopping")
			return
		}
		defer s.calls.done()
		defer func() {
			if p := recover(); p != nil {
				s.cfg.Logger.Error("handler panic", "path", r.URL.Path, "panic", p)
				writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		s.mux.ServeHTTP(w, r)
	})
}

// Serve answers requests on l until it is closed; no other accept error
// stops it (accept.go). Every request's context ends when its client hangs
// up or when Serve returns.
func (s *Server) Serve(l net.Listener) error {
	hs := s.httpServer()
	hs.RegisterOnShutdown(s.closeFresh) // run once the listener is closed
	s.mu.Lock()
	s.hs = hs
	s.mu.Unlock()
	err := hs.Serve(&admitListener{Listener: l, s: s})
	if !s.draining.Load() {
		s.cancelCalls() // stopped without a drain: the calls end with it
	}
	s.stop()
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.timeouts.head,
		ReadTimeout:       s.timeouts.read,
		WriteTimeout:      s.writeTimeout,
		IdleTimeout:       s.timeouts.idle,
		MaxHeaderBytes:    maxHead,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return s.callCtx },
		ConnContext:       withPeerUID,
		ConnState:         s.connState,
	}
}

func (s *Server) count(op string) {
	s.mu.Lock()
	c := s.ops[op]
	if c == nil {
		c = new(atomic.Int64)
		s.ops[op] = c
	}
	s.mu.Unlock()
	c.Add(1)
}

func (s *Server) tools(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.cfg.Tools.Tools())
}

// toolCall answers POST /v1/tools/{name}: the tool's result, HTTP 200
// even when the tool failed. The call runs on the request's context.
func (s *Server) toolCall(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > s.cfg.MaxBody {
		// Refused before any of it is read: a client that asked first
		// (Expect: 100-continue) does not send it at all.
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", s.cfg.MaxBody))
		return
	}
	n := s.cfg.MaxBody + 1 // a body that long is refused by the MaxBytesReader
	if r.ContentLength >= 0 {
		n = r.ContentLength
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody), n)
	defer s.releaseLarge(cap(body))
	var tooBig *http.MaxBytesError
	var req ToolRequest
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", s.cfg.MaxBody))
		return
	case err == nil:
		err = decodeRequest(body, &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
		return
	}
	body = nil // the request holds what it needs of it
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CallTimeout)
	defer cancel()
	name := r.PathValue("name")
	res, err := s.cfg.Tools.Call(ctx, name, req)
	if errors.Is(err, toolapi.ErrUnknownTool) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown tool %q", name))
		return
	}
	s.count(name)
	writeJSON(w, http.StatusOK, res)
}

// decodeRequest decodes a tool call's request as json.Decoder does (the
// first value; anything after it is ignored), without the Decoder's copy
// of the body where the body is that one value: a 64 MiB write is not held
// twice.
func decodeRequest(b []byte, req *ToolRequest) error {
	if json.Unmarshal(b, req) == nil {
		return nil
	}
	*req = ToolRequest{}
	return json.NewDecoder(bytes.NewReader(b)).Decode(req)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st := s.cfg.Mount
	if r.URL.Query().Get("fields") != "mount" && s.cfg.Status != nil {
		st = s.cfg.Status()
	}
	st.UptimeSeconds = time.Since(s.start).Seconds()
	st.Ops = map[string]int64{}
	s.mu.Lock()
	for k, v := range s.ops {
		st.Ops[k] = v.Load()
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
}

// ProcessRequest is the body of POST /v1/actors/{actor}/processes.
type ProcessRequest struct {
	Pid int `json:"pid"`
}

func (s *Server) registerProcess(w http.ResponseWriter, r *http.Request) {
	var req ProcessRequest
	if !s.decode(w, r, &req) {
		return
	}
	actor := r.PathValue("actor")
	if err := toolapi.CheckActor(actor); err != nil || actor == "" {
		writeError(w, http.StatusBadRequest, "the actor must be a name of at most 256 bytes without a NUL byte")
		return
	}
	if s.cfg.RegisterProcess == nil {
		writeError(w, http.StatusNotFound, "this daemon has no mount to attribute writes on")
		return
	}
	if err := s.cfg.RegisterProcess(actor, req.Pid, peerUIDOf(r.Context())); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.count("register_process")
	writeJSON(w, http.StatusOK, struct {
		Actor string `json:"actor"`
		Pid   int    `json:"pid"`
	}{actor, req.Pid})
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, http.StatusBadRequest, "history needs ?path=")
		return
	}
	h, err := s.cfg.Tools.History(r.URL.Query().Get("cwd"), p)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if h == nil {
		h = []HistoryEntry{}
	}
	writeJSON(w, http.StatusOK, h)
}

// needStore answers 404 for the workspace-wide routes when no store is wired.
func (s *Server) needStore(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Store == nil {
			writeError(w, http.StatusNotFound, "no checkpoints here")
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 { // a huge answer's buffer is not worth keeping
			bufPool.Put(buf)
		}
	}()
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		code, buf = http.StatusInternalServerError, bytes.NewBufferString(`{"error":"encode the answer"}`+"\n")
	}
	// One write with a length: no chunked encoding, no second flush.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg})
}
