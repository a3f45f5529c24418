package unixsocket

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"
)

// The client's one transport. Tool calls are the hot path: a harness makes
// thousands. net/http's Transport hands every request and response between
// goroutines (a write loop and a read loop per connection), which on two
// cores costs more than the tool call itself. So every request goes over
// connections of the client's own: the request is written and the answer
// read by the calling goroutine. A client keeps two pools of them, one for
// tool calls and one for the other routes: the daemon hands a connection
// that carries anything but a tool call to net/http for good (fastpath.go),
// and a tool call should not land on one of those.

// idleLimit is how long a connection may wait in the pool; well under the
// server's idle timeout, so a pooled connection is never one the server is
// closing.
const idleLimit = 30 * time.Second

type callConn struct {
	c        net.Conn
	r        *bufio.Reader
	w        *bufio.Writer
	used     time.Time
	deadline bool // a deadline is set on c
}

// maxClientConns bounds the connections of each of a client's pools, well
// under the connections a daemon serves at once (DefaultMaxConns): more
// concurrent calls wait for one rather than have the daemon refuse them.
const maxClientConns = 64

// maxIdleConns is how many idle connections a pool keeps.
const maxIdleConns = 16

// request is one request a client sends.
type request struct {
	method, target string
	body           []byte // JSON; nil: no body
	accept         string // an Accept header, if set
	upgrade        string // the protocol to upgrade the connection to, if set
}

// connPool keeps idle connections, and bounds the requests in flight.
type connPool struct {
	socket    string
	peer      *Peer // nil: whoever listens at socket
	mu        sync.Mutex
	idle      []*callConn
	slotsOnce sync.Once
	slots     chan struct{} // a request in flight holds one
}

// acquire waits for a request's slot; release gives it back.
func (p *connPool) acquire(ctx context.Context) error {
	p.slotsOnce.Do(func() { p.slots = make(chan struct{}, maxClientConns) })
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *connPool) release() { <-p.slots }

// get returns an idle connection (pooled) or a new one.
func (p *connPool) get(ctx context.Context) (cc *callConn, pooled bool, err error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		cc = p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(cc.used) < idleLimit {
			p.mu.Unlock()
			return cc, true, nil
		}
		cc.c.Close()
	}
	p.mu.Unlock()
	c, err := dialPeer(ctx, p.socket, p.peer)
	if err != nil {
		return nil, false, err
	}
	return newCallConn(c), false, nil
}

func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", socket)
}

func newCallConn(c net.Conn) *callConn {
	return &callConn{c: c, r: bufio.NewReaderSize(c, 32<<10), w: bufio.NewWriterSize(c, 32<<10)}
}

func (p *connPool) put(cc *callConn) {
	cc.used = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdleConns {
		cc.c.Close()
		return
	}
	p.idle = append(p.idle, cc)
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cc := range p.idle {
		cc.c.Close()
	}
	p.idle = nil
}

// do sends req on a pooled connection and hands the body of a 200 answer
// to read; any other answer is an *APIError. The connection goes back to
// the pool only after a complete exchange. An error of the transport
// (the daemon could not be reached, or the connection failed) says so;
// read's errors and the daemon's are returned as they are.
//
// A pooled connection may be one the daemon has closed since (it restarted,
// or it went away): writing to it fails, and the daemon, which acts only on
// a complete request, never saw this one. So a request that could not be
// written on a pooled connection, and got no answer, is sent again, once,
// on a new one; the idle connections, dead too most likely, are dropped.
// Checking each idle connection before use instead would cost a system call
// on every call.
func (p *connPool) do(ctx context.Context, req request, read func(*body) error) error {
	if err := p.acquire(ctx); err != nil {
		return p.unreachable(err)
	}
	defer p.release()
	for {
		cc, pooled, err := p.get(ctx)
		if err != nil {
			return p.unreachable(err)
		}
		written, err := p.exchange(ctx, cc, req, read)
		if written || !pooled || ctx.Err() != nil {
			return err
		}
		p.close()
	}
}

func (p *connPool) unreachable(err error) error {
	return fmt.Errorf("reach the dshfs daemon at %s: %w", p.socket, err)
}

// exchange makes one request on cc. written reports whether the request
// left in full: when it did not, the daemon cannot have acted on it.
func (p *connPool) exchange(ctx context.Context, cc *callConn, req request, read func(*body) error) (written bool, err error) {
	stop := cc.watch(ctx)
	// fail closes cc, whose connection failed with connErr, and returns
	// err, read's error saying more, or else a transport error.
	fail := func(err, connErr error) error {
		stop()
		cc.c.Close()
		switch {
		case ctx.Err() != nil:
			return p.unreachable(ctx.Err())
		case err != nil && err != connErr:
			return err
		}
		return p.unreachable(connErr)
	}
	writeRequest(cc.w, req)
	if err := cc.w.Flush(); err != nil {
		// The daemon may have answered before it stopped reading (a body
		// over its limit gets 413 and the connection closed): then it saw
		// the request, and its answer says more than a broken pipe.
		if err := answerAfterFailedWrite(ctx, cc); err != nil {
			stop()
			cc.c.Close()
			return true, err
		}
		return false, fail(nil, err)
	}
	a, err := readAnswer(cc.r)
	if err != nil {
		return true, fail(nil, err)
	}
	if a.code != http.StatusOK {
		err = a.error()
	} else {
		err = read(&a.body)
	}
	if a.body.err == nil {
		a.body.finish()
	}
	if a.body.err != nil {
		return true, fail(err, a.body.err)
	}
	// Only a connection whose cancel hook can no longer fire goes back to
	// the pool: a late hook would break the next call made on it.
	if stop() && !a.closing {
		p.put(cc)
	} else {
		cc.c.Close()
	}
	return true, err
}

// watch puts ctx's deadline on cc, and cuts it when ctx is done. The
// function returned stops that, reporting whether it had not happened.
func (cc *callConn) watch(ctx context.Context) (stop func() bool) {
	if dl, ok := ctx.Deadline(); ok {
		cc.c.SetDeadline(dl)
		cc.deadline = true
	} else if cc.deadline {
		cc.c.SetDeadline(time.Time{})
		cc.deadline = false
	}
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, func() { cc.c.SetDeadline(time.Unix(1, 0)) })
}

// writeRequest writes req's head and body to w.
func writeRequest(w *bufio.Writer, req request) {
	w.WriteString(req.method)
	w.WriteByte(' ')
	w.WriteString(req.target)
	w.WriteString(" HTTP/1.1\r\nHost: dshfs\r\n")
	if req.accept != "" {
		w.WriteString("Accept: " + req.accept + "\r\n")
	}
	if req.upgrade != "" {
		w.WriteString("Connection: Upgrade\r\nUpgrade: " + req.upgrade + "\r\n")
	}
	if req.body != nil {
		w.WriteString("Content-Type: application/json\r\nContent-Length: ")
		w.WriteString(strconv.Itoa(len(req.body)))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	w.Write(req.body)
}

// answerAfterFailedWrite returns the error answer the daemon may have sent
// before a write to it failed, or nil. A daemon that went away sent none:
// end of file at once. Only an error answer counts: a request not read in
// full cannot have succeeded.
func answerAfterFailedWrite(ctx context.Context, cc *callConn) error {
	if ctx.Err() != nil {
		return nil
	}
	cc.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	a, err := readAnswer(cc.r)
	if err != nil || a.code == http.StatusOK {
		return nil
	}
	return a.error()
}

// answer is one HTTP/1.1 response as the client reads it.
type answer struct {
	code    int
	closing bool // the connection closes after it
	body    body
}

// body is an answer's body, read from the connection as the reader asks.
type body struct {
	r      io.Reader
	br     *bufio.Reader
	length int64 // -1: not announced
	chunk  bool  // chunked: the trailer follows its end
	err    error // reading the connection failed: it is unusable
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// all reads the whole body.
func (b *body) all() ([]byte, error) {
	if b.length < 0 {
		return io.ReadAll(b)
	}
	buf := make([]byte, b.length)
	_, err := io.ReadFull(b, buf)
	return buf, err
}

// finish reads what the reader left of the body, and its trailer: the
// connection is then at the next answer, or b.err says why not.
func (b *body) finish() {
	io.Copy(io.Discard, b)
	if b.chunk && b.err == nil {
		_, b.err = b.br.ReadSlice('\n') // the empty trailer
	}
}

// exactReader reads the n bytes of a body announced by its length: the
// connection ending before them is an error.
type exactReader struct {
	r io.Reader
	n int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	n, err := e.r.Read(p[:min(int64(len(p)), e.n)])
	e.n -= int64(n)
	if err == io.EOF && e.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// error is the error of a 4xx or 5xx answer, its body read. The body of
// every such answer is an ErrorBody: this is where the client reads it.
func (a *answer) error() error {
	b, err := a.body.all()
	if err != nil {
		return err
	}
	var e ErrorBody
	json.Unmarshal(b, &e)
	return &APIError{Code: a.code, Message: e.Error}
}

// readAnswer reads the head of one HTTP/1.1 response: its status, how its
// body is framed (Content-Length, chunked, or to the end of the
// connection; none for a 1xx, 204 or 304) and whether the connection
// closes after it. It reads what the daemon writes, without net/http's
// header maps.
func readAnswer(br *bufio.Reader) (a answer, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return a, err
	}
	proto, rest, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(" "))
	status, _, _ := bytes.Cut(rest, []byte(" "))
	if a.code, err = strconv.Atoi(string(status)); err != nil || !bytes.HasPrefix(proto, []byte("HTTP/1.")) {
		return a, fmt.Errorf("dshfs daemon: bad status line %q", line)
	}
	a.closing = string(proto) == "HTTP/1.0"
	a.body = body{br: br, length: -1}
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return a, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		if err := a.header(line); err != nil {
			return a, err
		}
	}
	switch {
	case a.code < 200 || a.code == http.StatusNoContent || a.code == http.StatusNotModified:
		a.body.length, a.body.chunk = 0, false
		a.body.r = bytes.NewReader(nil)
	case a.body.chunk:
		a.body.length = -1
		a.body.r = httputil.NewChunkedReader(br)
	case a.body.length >= 0:
		a.body.r = &exactReader{r: br, n: a.body.length}
	default:
		a.body.r = br
		a.closing = true
	}
	return a, nil
}

// header takes one header line of an answer.
func (a *answer) header(line []byte) (err error) {
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimSpace(value)
	switch {
	case asciiEqualFold(name, "content-length"):
		if a.body.length, err = strconv.ParseInt(string(value), 10, 64); err != nil || a.body.length < 0 || a.body.length > 1<<30 {
			return fmt.Errorf("dshfs daemon: bad Content-Length %q", value)
		}
	case asciiEqualFold(name, "transfer-encoding"):
		a.body.chunk = asciiEqualFold(value, "chunked")
	case asciiEqualFold(name, "connection"):
		a.closing = a.closing || asciiEqualFold(value, "close")
	}
	return nil
}
