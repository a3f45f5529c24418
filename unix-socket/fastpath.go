package unixsocket

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The fast path. A tool call is the hot path of the socket, and net/http's
// server costs about 25 µs of each round trip here (a reader goroutine per
// request, header maps, the response writer's buffering). So each connection
// is read first by serveConn: a well-formed HTTP/1.1 tool call — POST
// /v1/tools/NAME with a Content-Length and nothing unusual — is answered
// directly; at the first request that is anything else the connection, with
// the bytes already read, is handed to net/http for good. Both answer tool
// calls with the same bytes.

const (
	maxHead     = 64 << 10 // bytes of request line and headers the fast path reads
	maxKeptBody = 64 << 10 // a connection keeps its body buffer up to this size
)

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

// head is what the fast path needs of a request's head.
type head struct {
	raw           []byte // every byte read, to replay on a hand-off
	tool          string
	contentLength int64
	close         bool
}

// serveConn answers the tool calls on c until it closes, or hands c to
// net/http at the first request the fast path does not take.
func (s *Server) serveConn(c net.Conn, hand *handoff) {
	defer func() {
		// The daemon outlives any fault in one connection.
		if r := recover(); r != nil {
			s.cfg.Logger.Error("panic serving a connection", "panic", r)
			c.Close()
		}
	}()
	br := bufio.NewReaderSize(c, 16<<10)
	var body []byte // the request body, reused while small
	reading, writing := lazyDeadline{set: c.SetReadDeadline}, lazyDeadline{set: c.SetWriteDeadline}
	for {
		reading.extend(2 * time.Minute) // idle, then the head
		h, fast, err := readHead(br)
		if err != nil {
			c.Close()
			return
		}
		if !fast {
			reading.clear()
			rest, _ := br.Peek(br.Buffered())
			hand.give(&prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(append(h.raw, rest...)), c)})
			return
		}
		if h.contentLength > s.cfg.MaxBody {
			s.answer(c, &writing, http.StatusRequestEntityTooLarge, errorJSON(fmt.Sprintf("request body over %d bytes", s.cfg.MaxBody)), true)
			c.Close()
			return
		}
		reading.extend(2 * time.Minute)
		body, err = readBody(br, body[:0], h.contentLength)
		if err != nil {
			c.Close()
			return
		}
		code, answer := s.fastCall(h.tool, body)
		if cap(body) > maxKeptBody {
			s.releaseLarge(cap(body))
			body = nil // a large write's buffer is not kept while the connection idles
		}
		if err := s.answer(c, &writing, code, answer, h.close); err != nil || h.close {
			c.Close()
			return
		}
	}
}

// fastCall runs a tool call as the net/http route does; a panic becomes a
// 500, as there.
func (s *Server) fastCall(name string, body []byte) (code int, answer []byte) {
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Logger.Error("panic in a tool call", "tool", name, "panic", r)
			code, answer = http.StatusInternalServerError, errorJSON("internal error")
		}
	}()
	return s.toolCall(context.Background(), name, body)
}

// answer writes one response, head and body in one writev, and returns
// body's buffer to the pool.
func (s *Server) answer(c net.Conn, writing *lazyDeadline, code int, body []byte, closing bool) error {
	var hb [128]byte
	b := hb[:0]
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(code)...)
	b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	if closing {
		b = append(b, "\r\nConnection: close"...)
	}
	b = append(b, "\r\n\r\n"...)
	writing.extend(s.writeTimeout)
	bufs := net.Buffers{b, body}
	_, err := bufs.WriteTo(c)
	putAnswer(body)
	return err
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

func (l *lazyDeadline) clear() {
	l.at = time.Time{}
	l.set(l.at)
}

// readHead reads a request's line and headers. fast says the fast path
// takes the request: POST /v1/tools/NAME HTTP/1.1 with a plain name, one
// Content-Length, and no Transfer-Encoding, Expect, Upgrade or query.
func readHead(br *bufio.Reader) (h head, fast bool, err error) {
	fast = true
	lengths := 0
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return h, false, errors.New("request head line too long")
			}
			if len(h.raw)+len(line) > 0 && errors.Is(err, io.EOF) {
				// A partial head: let net/http say what is wrong with it.
				h.raw = append(h.raw, line...)
				return h, false, nil
			}
			return h, false, err
		}
		h.raw = append(h.raw, line...)
		if len(h.raw) > maxHead {
			return h, false, nil // net/http answers 431
		}
		line = bytes.TrimRight(line, "\r\n")
		if n == 0 {
			fast = fast && parseRequestLine(line, &h)
			continue
		}
		if len(line) == 0 {
			return h, fast && lengths == 1, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			fast = false
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			v, err := strconv.ParseInt(string(value), 10, 64)
			fast = fast && err == nil && v >= 0
			h.contentLength = v
			lengths++
		case asciiEqualFold(name, "connection"):
			switch {
			case asciiEqualFold(value, "close"):
				h.close = true
			case !asciiEqualFold(value, "keep-alive"):
				fast = false
			}
		case asciiEqualFold(name, "transfer-encoding"), asciiEqualFold(name, "expect"), asciiEqualFold(name, "upgrade"):
			fast = false
		}
	}
}

func parseRequestLine(line []byte, h *head) bool {
	method, rest, ok1 := bytes.Cut(line, []byte(" "))
	target, proto, ok2 := bytes.Cut(rest, []byte(" "))
	name, ok3 := bytes.CutPrefix(target, []byte("/v1/tools/"))
	if !ok1 || !ok2 || !ok3 || string(method) != "POST" || string(proto) != "HTTP/1.1" || len(name) == 0 {
		return false
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || c == '_') {
			return false // escapes, slashes, a query: net/http's
		}
	}
	h.tool = string(name)
	return true
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
