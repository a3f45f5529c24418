package unixsocket

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// The accept loop. It must outlive every failure but a closed listener: a
// daemon whose socket stops accepting leaves every later call waiting in
// the kernel's backlog until a remount. Accept fails for passing reasons —
// out of descriptors (EMFILE, ENFILE) or kernel memory (ENOBUFS, ENOMEM), a
// peer gone before it was taken (ECONNABORTED) — and the shortage ends when
// connections close. So every error is retried, with net/http's backoff
// (5 ms doubling to 1 s), and a connection of ours closing retries at once.
// An error no retry can cure would be retried once a second, logged once.
// Connections are capped (Config.MaxConns) below the descriptor limit the
// daemon raises at start, so clients alone cannot exhaust it.

// admitListener is the listener net/http serves: it accepts from the
// socket's, retrying every failure but a closed listener, and admits each
// connection or refuses it (the cap).
type admitListener struct {
	net.Listener
	s  *Server
	ab acceptBackoff // Accept is called by one goroutine at a time (http.Server's)
}

func (l *admitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		switch {
		case errors.Is(err, net.ErrClosed):
			return nil, err
		case err != nil:
			l.ab.failed(l.s, err)
		default:
			l.ab.succeeded(l.s)
			if c := l.s.admit(c); c != nil {
				return c, nil
			}
		}
	}
}

// acceptBackoff paces the retries of a failing Accept and logs each
// episode of failures once: when it starts and when accepting works again.
// An episode that starts within a minute of the last one logged is counted
// in the next log rather than logged itself (a limit being hit again and
// again).
type acceptBackoff struct {
	delay      time.Duration // zero: Accept is working
	failures   int
	since      time.Time
	logged     bool      // this episode's start was logged
	lastLogged time.Time // when an episode's start was last logged
	unlogged   int       // episodes since then not logged
}

func (ab *acceptBackoff) failed(s *Server, err error) {
	if ab.delay == 0 {
		ab.delay, ab.failures, ab.since = 5*time.Millisecond, 0, time.Now()
		ab.logged = time.Since(ab.lastLogged) >= time.Minute
		if !ab.logged {
			ab.unlogged++
		} else {
			ab.lastLogged = ab.since
			s.cfg.Logger.Warn("socket: accept failed; retrying until it works", "err", err,
				"open_connections", s.open.Load(), "episodes_not_logged", ab.unlogged)
			ab.unlogged = 0
		}
	} else {
		ab.delay = min(2*ab.delay, time.Second)
	}
	ab.failures++
	t := time.NewTimer(ab.delay)
	select {
	case <-t.C:
	case <-s.freed:
		t.Stop()
	}
}

func (ab *acceptBackoff) succeeded(s *Server) {
	if ab.delay == 0 {
		return
	}
	if ab.logged {
		s.cfg.Logger.Info("socket: accepting again", "failures", ab.failures,
			"after", time.Since(ab.since).Round(time.Millisecond))
	}
	ab.delay = 0
}

// admit counts c among the open connections until it is closed, or
// refuses it (nil) if MaxConns are open.
func (s *Server) admit(c net.Conn) net.Conn {
	if s.open.Add(1) > int64(s.cfg.MaxConns) {
		s.open.Add(-1)
		s.refuse(c)
		return nil
	}
	return &countedConn{Conn: c, s: s}
}

// refuse answers c 503 and closes it, in a goroutine of its own, at most
// maxRefusing at a time: past that, connections are closed without an
// answer, so that a flood costs little. The answer follows the request's
// first bytes (or a moment's silence): an HTTP client takes an answer that
// comes before its request as a fault of the connection. Then, as net/http
// does with a request it will not read, the write side is shut and what
// the client still sends is read and dropped until it closes, or for
// refuseGrace: a Unix socket closed with bytes unread fails the client's
// next write (EPIPE), which it may see before the answer. Refusals are
// logged at most once a minute.
func (s *Server) refuse(c net.Conn) {
	s.refused++
	if time.Since(s.refusedLogged) >= time.Minute {
		s.cfg.Logger.Warn("socket: connections over the cap refused", "max_connections", s.cfg.MaxConns, "refused", s.refused)
		s.refused, s.refusedLogged = 0, time.Now()
	}
	if s.refusing.Add(1) > maxRefusing {
		s.refusing.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer s.refusing.Add(-1)
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(refuseGrace))
		var b [4 << 10]byte
		c.Read(b[:])
		body := errorJSON(fmt.Sprintf("too many connections: %d are open, the most this daemon serves", s.cfg.MaxConns))
		resp := &http.Response{StatusCode: http.StatusServiceUnavailable, ProtoMajor: 1, ProtoMinor: 1, Close: true,
			Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: int64(len(body)),
			Body: io.NopCloser(bytes.NewReader(body))}
		c.SetDeadline(time.Now().Add(refuseGrace))
		if resp.Write(c) != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, c)
	}()
}

const (
	refuseGrace = 200 * time.Millisecond // each wait of a refusal: for the request, the answer's write, the drain
	maxRefusing = 64                     // refusals answered at once
)

// errorJSON is the body writeError sends.
func errorJSON(msg string) []byte {
	b, _ := json.Marshal(ErrorBody{Error: msg})
	return append(b, '\n')
}

// countedConn is an accepted connection, counted until it is closed
// (net/http may close it more than once).
type countedConn struct {
	net.Conn
	s      *Server
	closed atomic.Bool
}

// CloseWrite shuts the write side, which net/http does before closing a
// connection whose request it did not read in full, so that the client
// reads the answer before its write fails.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.s.open.Add(-1)
		select {
		case c.s.freed <- struct{}{}: // a descriptor is free: a failing Accept may retry now
		default:
		}
	}
	return err
}
