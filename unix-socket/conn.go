package unixsocket

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	used time.Time
}

// connPool keeps idle call connections.
type connPool struct {
	socket string
	mu     sync.Mutex
	idle   []*callConn
}

func (p *connPool) get(ctx context.Context) (*callConn, error) {
	for {
		p.mu.Lock()
		if len(p.idle) == 0 {
			p.mu.Unlock()
			break
		}
		cc := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.mu.Unlock()
		if time.Since(cc.used) < idleLimit && cc.alive() {
			return cc, nil
		}
		cc.c.Close()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", p.socket)
	if err != nil {
		return nil, err
	}
	return &callConn{c: c, r: bufio.NewReaderSize(c, 32<<10), w: bufio.NewWriterSize(c, 32<<10)}, nil
}

// alive reports whether the daemon still holds its end of an idle
// connection (one that restarted has closed it): a peek that would block
// says yes; end of file, data nobody asked for, or an error say no.
func (cc *callConn) alive() bool {
	if cc.r.Buffered() > 0 {
		return false
	}
	sc, ok := cc.c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	rc.Read(func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		alive = errors.Is(err, unix.EAGAIN)
		return true // never wait
	})
	return alive
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
func (p *connPool) post(ctx context.Context, path string, body []byte, decode func([]byte) error) error {
	cc, err := p.get(ctx)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		cc.c.SetDeadline(dl)
	} else {
		cc.c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { cc.c.SetDeadline(time.Unix(1, 0)) })
	w := cc.w
	w.WriteString("POST ")
	w.WriteString(path)
	w.WriteString(" HTTP/1.1\r\nHost: dshfs\r\nContent-Type: application/json\r\nContent-Length: ")
	w.WriteString(strconv.Itoa(len(body)))
	w.WriteString("\r\n\r\n")
	w.Write(body)
	fail := func(err error) error {
		stop()
		cc.c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(cc.r, nil)
	if err != nil {
		return fail(err)
	}
	b, err := readBody(resp)
	resp.Body.Close()
	if err != nil {
		return fail(err)
	}
	// Only a connection whose cancel hook can no longer fire goes back to
	// the pool: a late hook would break the next call made on it.
	if stop() && !resp.Close {
		p.put(cc)
	} else {
		cc.c.Close()
	}
	if resp.StatusCode != http.StatusOK {
		var e ErrorBody
		json.Unmarshal(b, &e)
		return &APIError{Code: resp.StatusCode, Message: e.Error}
	}
	if err := decode(b); err != nil {
		return fmt.Errorf("dshfs daemon: bad answer: %w", err)
	}
	return nil
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cc := range p.idle {
		cc.c.Close()
	}
	p.idle = nil
}

// readBody reads a response body, sized by its Content-Length when given.
func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= 1<<30 {
		b := make([]byte, n)
		_, err := io.ReadFull(resp.Body, b)
		return b, err
	}
	return io.ReadAll(resp.Body)
}
