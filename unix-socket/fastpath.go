package unixsocket

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The fast path. A tool call is the hot path of the socket, and net/http's
// server costs about 25 µs of each round trip here (a reader goroutine per
// request, header maps, the response writer's buffering). So each connection
// is read first by serveConn: a well-formed HTTP/1.1 request of a fast
// route of the table (route.fast: POST /v1/tools/{name}) with a
// Content-Length and nothing unusual, in the narrow form head.go describes,
// is answered directly; at the first request that is anything else, or
// whose body the connection ends before, the connection, with the bytes
// already read, is handed to net/http for good. So every request the fast
// path does not answer is answered by net/http exactly as if there were no
// fast path. Both answer with the route's fastHandler: the same bytes.

const (
	maxHead     = 64 << 10 // bytes of request line and headers the fast path reads
	maxKeptBody = 64 << 10 // a connection keeps its head and body buffers up to this size
)

// fastRoute is a route of the table the fast path answers (route.fast):
// a request whose line is method, prefix, a value for the wildcard of
// a-z and _ only (no escapes, nothing net/http could read differently),
// and HTTP/1.1.
type fastRoute struct {
	line     []byte // "METHOD PREFIX"
	wildcard string
	answer   fastHandler
}

// newFastRoute reads r's pattern, which must end in its one wildcard.
func newFastRoute(r route) *fastRoute {
	method, path, _ := strings.Cut(r.pattern, " ")
	cut := strings.LastIndexByte(path, '/') + 1
	prefix, last := path[:cut], path[cut:]
	name, ok := strings.CutPrefix(last, "{")
	name, ok2 := strings.CutSuffix(name, "}")
	if !ok || !ok2 || name == "" || strings.ContainsAny(prefix, "{}") || method == "" {
		panic("unixsocket: a fast route's pattern must be METHOD /path/{wildcard}: " + r.pattern)
	}
	return &fastRoute{line: []byte(method + " " + prefix), wildcard: name, answer: r.fast}
}

// handoff is the listener net/http serves: the connections serveConn gives
// up.
type handoff struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	err  error
}

func newHandoff(addr net.Addr) *handoff {
	return &handoff{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.ch:
		return c, nil
	case <-h.done:
		return nil, h.err
	}
}

func (h *handoff) Close() error   { h.stop(net.ErrClosed); return nil }
func (h *handoff) Addr() net.Addr { return h.addr }

func (h *handoff) stop(err error) {
	h.once.Do(func() {
		h.err = err
		close(h.done)
	})
}

func (h *handoff) give(c net.Conn) {
	select {
	case h.ch <- c:
	case <-h.done:
		c.Close()
	}
}

// prefixConn replays bytes already read before reading the connection.
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// reqReader reads a connection's requests for the fast path, under
// net/http's deadlines: idle (waiting for a request), head (from its first
// byte; from the accept, for a connection's first request) and read (the
// whole request, from its first byte). A client that trickles bytes cannot
// stretch any of them.
type reqReader struct {
	dr       deadlineReader
	br       *bufio.Reader
	t        timeouts
	start    time.Time // the current request's first byte came (or the connection was accepted)
	routes   []*fastRoute
	h        head
	body     []byte // the request body, its buffer reused while small
	answered bool   // a request came before on this connection
}

type timeouts struct{ idle, head, read time.Duration }

func newReqReader(c deadlineConn, t timeouts, accepted time.Time, routes []*fastRoute) *reqReader {
	r := &reqReader{dr: deadlineReader{c: c}, t: t, start: accepted, routes: routes}
	r.br = bufio.NewReaderSize(&r.dr, 16<<10)
	return r
}

type deadlineConn interface {
	io.Reader
	SetReadDeadline(time.Time) error
}

// deadlineReader reads c under the deadline want, which it sets on c only
// when a read is about to be made and the deadline set is later than want
// or earlier by more than a second (or an eighth of the time left, if
// less): a request that arrives in one read, as tool calls do, sets none,
// and a busy connection sets one about once a second rather than at every
// request.
type deadlineReader struct {
	c         deadlineConn
	want, set time.Time
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if d.set.After(d.want) || d.want.Sub(d.set) > min(time.Second, time.Until(d.want)/8) {
		d.set = d.want
		d.c.SetReadDeadline(d.set)
	}
	return d.c.Read(p)
}

// clear takes the deadline off c, for net/http to set its own.
func (d *deadlineReader) clear() {
	if !d.set.IsZero() {
		d.set = time.Time{}
		d.c.SetReadDeadline(d.set)
	}
}

// verdict is what to do with a connection after reading from it.
type verdict int

const (
	closeConn verdict = iota // it ended or failed: close it, as net/http would, without an answer
	handOff                  // the request is net/http's: hand it the connection (replay)
	tooLarge                 // the body announced is over the limit: answer 413 and close
	serve                    // a request of a fast route read in full: r.h and r.body
)

// readHead waits for the next request and reads its head.
func (r *reqReader) readHead(maxBody int64) verdict {
	if r.answered {
		r.dr.want = time.Now().Add(r.t.idle)
		if skipBlankLines(r.br) != nil {
			return closeConn
		}
		r.start = time.Now()
	}
	r.answered = true
	r.dr.want = r.start.Add(r.t.head)
	r.body = r.body[:0] // nothing of the last request's body is replayed
	if cap(r.h.raw) > maxKeptBody {
		r.h.raw = nil // after a huge head, a small buffer again
	}
	switch fast, err := readHead(r.br, &r.h, r.routes); {
	case err != nil:
		return closeConn
	case !fast:
		return handOff
	case r.h.contentLength > maxBody:
		return tooLarge
	}
	return serve
}

// readBody reads the body of the request whose head readHead read. A body
// cut short by the end of the connection is net/http's to answer.
func (r *reqReader) readBody() verdict {
	var err error
	r.dr.want = r.start.Add(r.t.read)
	r.body, err = readBody(r.br, r.body[:0], r.h.contentLength)
	switch {
	case err == io.ErrUnexpectedEOF:
		return handOff
	case err != nil:
		return closeConn
	}
	return serve
}

// replay is what net/http must read before the rest of the connection:
// the head, any body read, and what is buffered.
func (r *reqReader) replay() []byte {
	rest, _ := r.br.Peek(r.br.Buffered())
	return slices.Concat(r.h.raw, r.body, rest)
}

// serveConn answers the tool calls on c, accepted at the time given, until
// it closes, or hands c to net/http at the first request the fast path does
// not take. It reads and writes the bare connection, c.Conn: net.Buffers
// writes head and body in one writev only to a *net.UnixConn itself, and a
// client woken by the head alone waits again for the body (about 20 µs per
// call across processes).
func (s *Server) serveConn(c *countedConn, hand *handoff, accepted time.Time) {
	defer func() {
		// The daemon outlives any fault in one connection.
		if r := recover(); r != nil {
			s.cfg.Logger.Error("panic serving a connection", "panic", r)
			c.Close()
		}
	}()
	conn := c.Conn
	r := newReqReader(conn, s.timeouts, accepted, s.fast)
	writing := lazyDeadline{set: conn.SetWriteDeadline}
	for {
		v := r.readHead(s.cfg.MaxBody)
		if v == serve {
			v = r.readBody()
		}
		switch v {
		case closeConn:
			c.Close()
			return
		case handOff:
			r.dr.clear()
			s.conns.remove(c) // net/http's now, drained by its Shutdown
			hand.give(&prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(r.replay()), conn)})
			return
		case tooLarge:
			s.answer(conn, &writing, http.StatusRequestEntityTooLarge, errorJSON(fmt.Sprintf("request body over %d bytes", s.cfg.MaxBody)), true)
			c.Close()
			return
		}
		if !s.conns.busy(c) {
			c.Close() // the server is stopping: the request is not run
			return
		}
		code, answer := s.fastCall(r.h.route, r.h.value, r.body)
		if cap(r.body) > maxKeptBody {
			s.releaseLarge(cap(r.body))
			r.body = nil // a large write's buffer is not kept while the connection idles
		}
		err := s.answer(conn, &writing, code, answer, r.h.close)
		if stopping := s.conns.answered(c); err != nil || r.h.close || stopping {
			c.Close()
			return
		}
	}
}

// fastCall answers a request of fr as the net/http route does; a panic
// becomes a 500, as there.
func (s *Server) fastCall(fr *fastRoute, value string, body []byte) (code int, answer []byte) {
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Logger.Error("handler panic", "path", string(fr.line)+value, "panic", r)
			code, answer = http.StatusInternalServerError, errorJSON("internal error")
		}
	}()
	return fr.answer(s.callCtx, value, body)
}

// answer writes one response, head and body in one writev, and returns
// body's buffer to the pool.
func (s *Server) answer(c net.Conn, writing *lazyDeadline, code int, body []byte, closing bool) error {
	var hb [128]byte
	b := appendAnswerHead(hb[:0], code, len(body), closing)
	writing.extend(s.writeTimeout)
	bufs := net.Buffers{b, body}
	_, err := bufs.WriteTo(c)
	putAnswer(body)
	return err
}

// appendAnswerHead appends the head of a JSON answer of n bytes.
func appendAnswerHead(b []byte, code, n int, closing bool) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(code)...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	if closing {
		b = append(b, "\r\nConnection: close"...)
	}
	return append(b, "\r\n\r\n"...)
}

// lazyDeadline sets one of a connection's deadlines to d from now, but
// moves it only once it has fallen a second behind: a busy connection
// updates its timer about once a second rather than at every request.
type lazyDeadline struct {
	at  time.Time
	set func(time.Time) error
}

func (l *lazyDeadline) extend(d time.Duration) {
	if at := time.Now().Add(d); at.Sub(l.at) > time.Second {
		l.at = at
		l.set(at)
	}
}
