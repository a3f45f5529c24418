package unixsocket

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The fast path. A tool call is the hot path of the socket, and net/http's
// server costs about 25 µs of each round trip here (a reader goroutine per
// request, header maps, the response writer's buffering). So each connection
// is read first by serveConn: a well-formed HTTP/1.1 tool call — POST
// /v1/tools/NAME with a Content-Length and nothing unusual, in the narrow
// form head.go describes — is answered directly; at the first request that
// is anything else, or whose body the connection ends before, the
// connection, with the bytes already read, is handed to net/http for good.
// So every request the fast path does not answer is answered by net/http
// exactly as if there were no fast path. Both answer tool calls with the
// same bytes.

const (
	maxHead     = 64 << 10 // bytes of request line and headers the fast path reads
	maxKeptBody = 64 << 10 // a connection keeps its head and body buffers up to this size
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

// reqReader reads a connection's requests for the fast path.
type reqReader struct {
	br       *bufio.Reader
	h        head
	body     []byte // the request body, its buffer reused while small
	answered bool   // a request came before on this connection
}

func newReqReader(r io.Reader) *reqReader {
	return &reqReader{br: bufio.NewReaderSize(r, 16<<10)}
}

// verdict is what to do with a connection after reading from it.
type verdict int

const (
	closeConn verdict = iota // it ended or failed: close it, as net/http would, without an answer
	handOff                  // the request is net/http's: hand it the connection (replay)
	tooLarge                 // the body announced is over the limit: answer 413 and close
	serve                    // a tool call read in full: r.h and r.body
)

// readHead waits for the next request and reads its head.
func (r *reqReader) readHead(maxBody int64) verdict {
	if r.answered {
		if skipBlankLines(r.br) != nil {
			return closeConn
		}
	}
	r.answered = true
	r.body = r.body[:0] // nothing of the last request's body is replayed
	if cap(r.h.raw) > maxKeptBody {
		r.h.raw = nil // after a huge head, a small buffer again
	}
	switch fast, err := readHead(r.br, &r.h); {
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
	r := newReqReader(c)
	reading, writing := lazyDeadline{set: c.SetReadDeadline}, lazyDeadline{set: c.SetWriteDeadline}
	for {
		reading.extend(2 * time.Minute) // idle, then the head
		v := r.readHead(s.cfg.MaxBody)
		if v == serve {
			reading.extend(2 * time.Minute)
			v = r.readBody()
		}
		switch v {
		case closeConn:
			c.Close()
			return
		case handOff:
			reading.clear()
			hand.give(&prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(r.replay()), c)})
			return
		case tooLarge:
			s.answer(c, &writing, http.StatusRequestEntityTooLarge, errorJSON(fmt.Sprintf("request body over %d bytes", s.cfg.MaxBody)), true)
			c.Close()
			return
		}
		code, answer := s.fastCall(r.h.tool, r.body)
		if cap(r.body) > maxKeptBody {
			s.releaseLarge(cap(r.body))
			r.body = nil // a large write's buffer is not kept while the connection idles
		}
		if err := s.answer(c, &writing, code, answer, r.h.close); err != nil || r.h.close {
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
