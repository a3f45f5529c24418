package unixsocket

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
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
	code, b, closing, err := readAnswer(cc.r)
	if err != nil {
		return fail(err)
	}
	// Only a connection whose cancel hook can no longer fire goes back to
	// the pool: a late hook would break the next call made on it.
	if stop() && !closing {
		p.put(cc)
	} else {
		cc.c.Close()
	}
	if code != http.StatusOK {
		var e ErrorBody
		json.Unmarshal(b, &e)
		return &APIError{Code: code, Message: e.Error}
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
