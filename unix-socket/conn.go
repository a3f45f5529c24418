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

// Tool calls are the hot path: a harness makes thousands. net/http's
// Transport hands every request and response between goroutines (a write
// loop and a read loop per connection), which on two cores costs more than
// the tool call itself. Calls therefore go over connections of their own:
// the request is written and the response read (with net/http's own
// parser) by the calling goroutine. Other routes use the Transport.

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

// maxClientConns bounds a client's connections of each kind (tool calls,
// and the other routes'), well under the connections a daemon serves at
// once (DefaultMaxConns): more concurrent calls wait for one rather than
// have the daemon refuse them.
const maxClientConns = 64

// connPool keeps idle call connections, and bounds the calls in flight.
type connPool struct {
	socket    string
	mu        sync.Mutex
	idle      []*callConn
	slotsOnce sync.Once
	slots     chan struct{} // a call in flight holds one
}

// acquire waits for a call's slot; release gives it back.
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
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", p.socket)
	if err != nil {
		return nil, false, err
	}
	return &callConn{c: c, r: bufio.NewReaderSize(c, 32<<10), w: bufio.NewWriterSize(c, 32<<10)}, false, nil
}

func (p *connPool) put(cc *callConn) {
	cc.used = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= 16 {
		cc.c.Close()
		return
	}
	p.idle = append(p.idle, cc)
}

// post sends body to path on a pooled connection and hands the body of a
// 200 answer to decode. The connection goes back to the pool only after a
// complete exchange.
//
// A pooled connection may be one the daemon has closed since (it restarted,
// or it went away): writing to it fails, and the daemon, which acts only on
// a complete request, never saw this one. So a request that could not be
// written on a pooled connection, and got no answer, is sent again, once,
// on a new one; the idle connections, dead too most likely, are dropped.
// Checking each idle connection before use instead would cost a system call
// on every call.
func (p *connPool) post(ctx context.Context, path string, body []byte, decode func([]byte) error) error {
	if err := p.acquire(ctx); err != nil {
		return err
	}
	defer p.release()
	for {
		cc, pooled, err := p.get(ctx)
		if err != nil {
			return err
		}
		written, err := p.exchange(ctx, cc, path, body, decode)
		if written || !pooled || ctx.Err() != nil {
			return err
		}
		p.close()
	}
}

// exchange makes one request on cc. written reports whether the request
// left in full: when it did not, the daemon cannot have acted on it.
func (p *connPool) exchange(ctx context.Context, cc *callConn, path string, body []byte, decode func([]byte) error) (written bool, err error) {
	if dl, ok := ctx.Deadline(); ok {
		cc.c.SetDeadline(dl)
		cc.deadline = true
	} else if cc.deadline {
		cc.c.SetDeadline(time.Time{})
		cc.deadline = false
	}
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { cc.c.SetDeadline(time.Unix(1, 0)) })
	}
	fail := func(err error) error {
		stop()
		cc.c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	w := cc.w
	w.WriteString("POST ")
	w.WriteString(path)
	w.WriteString(" HTTP/1.1\r\nHost: dshfs\r\nContent-Type: application/json\r\nContent-Length: ")
	w.WriteString(strconv.Itoa(len(body)))
	w.WriteString("\r\n\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		// The daemon may have answered before it stopped reading (a body
		// over its limit gets 413 and the connection closed): then it saw
		// the request, and its answer says more than a broken pipe.
		code, b, ok := answerAfterFailedWrite(ctx, cc)
		if !ok {
			return false, fail(err)
		}
		stop()
		cc.c.Close()
		return true, answerError(code, b)
	}
	code, b, closing, err := readAnswer(cc.r)
	if err != nil {
		return true, fail(err)
	}
	// Only a connection whose cancel hook can no longer fire goes back to
	// the pool: a late hook would break the next call made on it.
	if stop() && !closing {
		p.put(cc)
	} else {
		cc.c.Close()
	}
	if code != http.StatusOK {
		return true, answerError(code, b)
	}
	if err := decode(b); err != nil {
		return true, fmt.Errorf("dshfs daemon: bad answer: %w", err)
	}
	return true, nil
}

// answerAfterFailedWrite reads an answer the daemon may have sent before a
// write to it failed. A daemon that went away sent none: end of file at
// once. It reports only an error answer: a request not read in full cannot
// have succeeded.
func answerAfterFailedWrite(ctx context.Context, cc *callConn) (code int, body []byte, ok bool) {
	if ctx.Err() != nil {
		return 0, nil, false
	}
	cc.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	code, body, _, err := readAnswer(cc.r)
	return code, body, err == nil && code != http.StatusOK
}

// answerError is the error of a 4xx or 5xx answer.
func answerError(code int, body []byte) error {
	var e ErrorBody
	json.Unmarshal(body, &e)
	return &APIError{Code: code, Message: e.Error}
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cc := range p.idle {
		cc.c.Close()
	}
	p.idle = nil
}

// readAnswer reads one HTTP/1.1 response: its status, its body (by
// Content-Length, chunked, or to the end of the connection) and whether the
// connection closes after it. It reads what the daemon writes, without
// net/http's header maps.
func readAnswer(br *bufio.Reader) (code int, body []byte, closing bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	proto, rest, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(" "))
	status, _, _ := bytes.Cut(rest, []byte(" "))
	if code, err = strconv.Atoi(string(status)); err != nil || !bytes.HasPrefix(proto, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("dshfs daemon: bad status line %q", line)
	}
	closing = string(proto) == "HTTP/1.0"
	length, chunked := int64(-1), false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 || length > 1<<30 {
				return 0, nil, false, fmt.Errorf("dshfs daemon: bad Content-Length %q", value)
			}
		case asciiEqualFold(name, "transfer-encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "connection"):
			closing = closing || asciiEqualFold(value, "close")
		}
	}
	switch {
	case chunked:
		body, err = io.ReadAll(httputil.NewChunkedReader(br))
		if err == nil {
			_, err = br.ReadSlice('\n') // the empty trailer
		}
	case length >= 0:
		body = make([]byte, length)
		_, err = io.ReadFull(br, body)
	default:
		body, err = io.ReadAll(br)
		closing = true
	}
	return code, body, closing, err
}
