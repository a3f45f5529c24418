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
	"os"
	"path/filepath"
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
	// DefaultMaxConns): one more is answered 503 and closed at once, so
	// that no number of clients can run the daemon out of descriptors.
	// Each holds a descriptor and a 16 KiB buffer; a connection left idle
	// is closed after two minutes, a silent new one after ten seconds.
	MaxConns int
	Logger   *slog.Logger
}

// Server serves the API.
type Server struct {
	cfg          Config
	start        time.Time
	ctx          context.Context // done when Serve returns or Shutdown begins: sessions end
	stop         context.CancelFunc
	callCtx      context.Context // the calls' own: cancelled when Shutdown cuts them off
	cancelCalls  context.CancelFunc
	mux          *http.ServeMux
	routes       []route       // the route table
	fast         []*fastRoute  // its fast routes
	writeTimeout time.Duration // bounds writing an answer (streamed ones clear it)
	timeouts                   // reading requests, on the fast path and net/http alike

	mu       sync.Mutex
	ops      map[string]*atomic.Int64
	listener net.Listener // Serve's, and its net/http server (for Shutdown)
	hs       *http.Server

	conns    connSet // the fast path's connections (drain.go)
	sessions tracker // MCP sessions being served

	open  atomic.Int64  // connections accepted and not yet closed
	freed chan struct{} // a connection closed (see accept.go)

	refused       int       // connections refused since refusedLogged (accept loop only)
	refusedLogged time.Time //

	releasing   atomic.Bool // a large body's memory is to go back to the OS (body.go)
	lastRelease time.Time
}

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
		h := r.handler
		if r.fast != nil {
			fr := newFastRoute(r)
			s.fast = append(s.fast, fr)
			h = s.serveFastRoute(fr)
		}
		s.mux.HandleFunc(r.pattern, h)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s
}

// route is one entry of the route table: net/http serves it with handler,
// or, if fast is set, with fast, which the fast path (fastpath.go) calls
// too for the requests it takes. A fast route's pattern ends in its one
// wildcard, whose value fast is given with the request's body.
type route struct {
	pattern string
	handler http.HandlerFunc
	fast    fastHandler
}

// fastHandler answers a request of a fast route: the HTTP status and the
// JSON answer, in a buffer putAnswer may take back. The answer keeps
// nothing of body.
type fastHandler func(ctx context.Context, wildcard string, body []byte) (code int, answer []byte)

// routeTable is the API's routes, sorted.
func (s *Server) routeTable() []route {
	return []route{
		{pattern: "POST /v1/actors/{actor}/processes", handler: s.registerProcess},
		{pattern: "GET /v1/checkpoints", handler: s.needStore(s.checkpoints)},
		{pattern: "POST /v1/checkpoints", handler: s.needStore(s.checkpoint)},
		{pattern: "DELETE /v1/checkpoints/{name}", handler: s.needStore(s.removeCheckpoint)},
		{pattern: "GET /v1/diff", handler: s.diff},
		{pattern: "POST /v1/gc", handler: s.needStore(s.gc)},
		{pattern: "GET /v1/history", handler: s.history},
		{pattern: "GET /v1/log", handler: s.log},
		{pattern: "POST /v1/mcp", handler: s.mcp},
		{pattern: "GET /v1/openapi.json", handler: s.openAPI},
		{pattern: "POST /v1/restore", handler: s.restore},
		{pattern: "POST /v1/rewind", handler: s.needStore(s.rewind)},
		{pattern: "GET /v1/show", handler: s.show},
		{pattern: "GET /v1/status", handler: s.status},
		{pattern: "GET /v1/tools", handler: s.tools},
		{pattern: "POST /v1/tools/{name}", fast: s.toolCall},
	}
}

// Handler is the API with panics turned into 500s.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
// stops it (accept.go).
func (s *Server) Serve(l net.Listener) error {
	hs := s.httpServer()
	s.mu.Lock()
	s.listener, s.hs = l, hs
	s.mu.Unlock()
	// Connections are read by the fast path first (fastpath.go); the ones
	// it gives up are served by hs.
	hand := newHandoff(l.Addr())
	go s.acceptLoop(l, hand)
	err := hs.Serve(hand)
	l.Close() // hs closed the hand-off listener: stop accepting too
	s.stop()
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// httpServer is the net/http server of the requests the fast path does
// not take.
func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.timeouts.head,
		ReadTimeout:       s.timeouts.read,
		WriteTimeout:      s.writeTimeout,
		IdleTimeout:       s.timeouts.idle,
		MaxHeaderBytes:    maxHead, // what the fast path hands over is no more than net/http takes
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
		ConnContext:       withPeerUID,
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

// serveFastRoute serves fr through net/http, as the fast path does.
func (s *Server) serveFastRoute(fr *fastRoute) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var code int
		var b []byte
		n := s.cfg.MaxBody + 1 // a body that long is refused by the MaxBytesReader
		if r.ContentLength >= 0 {
			n = min(n, r.ContentLength)
		}
		body, err := readAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody), n)
		defer s.releaseLarge(cap(body))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			code, b = http.StatusRequestEntityTooLarge, errorJSON(fmt.Sprintf("request body over %d bytes", s.cfg.MaxBody))
		case err != nil:
			code, b = http.StatusBadRequest, errorJSON("malformed JSON: "+err.Error())
		default:
			code, b = fr.answer(r.Context(), r.PathValue(fr.wildcard), body)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(code)
		w.Write(b)
		putAnswer(b)
	}
}

// toolCall runs the tool name with the request in body and returns the
// HTTP status and the JSON answer (a fastHandler: the fast path and
// net/http answer with it alike).
func (s *Server) toolCall(ctx context.Context, name string, body []byte) (int, []byte) {
	var req ToolRequest
	if err := decodeRequest(body, &req); err != nil {
		return http.StatusBadRequest, errorJSON("malformed JSON: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	res, err := s.cfg.Tools.Call(ctx, name, req)
	if errors.Is(err, toolapi.ErrUnknownTool) {
		return http.StatusNotFound, errorJSON(fmt.Sprintf("unknown tool %q", name))
	}
	s.count(name)
	bp := answerPool.Get().(*[]byte)
	if b, ok := appendToolResult((*bp)[:0], res); ok {
		return http.StatusOK, b
	}
	answerPool.Put(bp)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return http.StatusInternalServerError, errorJSON("encode the answer")
	}
	return http.StatusOK, buf.Bytes()
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

// putAnswer keeps an answer's buffer for the next one, unless it is huge.
func putAnswer(b []byte) {
	if cap(b) <= 1<<20 {
		b = b[:0]
		answerPool.Put(&b)
	}
}

// errorJSON is the body writeError sends.
func errorJSON(msg string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(ErrorBody{Error: msg})
	return buf.Bytes()
}

var answerPool = sync.Pool{New: func() any { return new([]byte) }}

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

// Listen creates the socket at path: its directory 0700, the socket 0600.
// An existing socket file is replaced only after a dial proves nobody
// listens on it; anything else at path is an error. Connections from
// another user are refused where the platform says who the peer is.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another dshfs is serving this socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return &peerListener{Listener: l}, nil
}

// peerListener drops connections from other users.
type peerListener struct{ net.Listener }

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if uc, ok := c.(*net.UnixConn); ok && !sameUser(uc) {
			c.Close()
			continue
		}
		return c, nil
	}
}
