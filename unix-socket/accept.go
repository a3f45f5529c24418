package unixsocket

import (
	"errors"
	"fmt"
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

// acceptLoop serves the connections of l until l is closed, then stops
// hand.
func (s *Server) acceptLoop(l net.Listener, hand *handoff) {
	var ab acceptBackoff
	for {
		c, err := l.Accept()
		switch {
		case errors.Is(err, net.ErrClosed):
			hand.stop(err)
			return
		case err != nil:
			ab.failed(s, err)
		default:
			ab.succeeded(s)
			s.admit(c, hand)
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

// admit serves c, counted among the open connections until it is closed,
// or refuses it if MaxConns are open.
func (s *Server) admit(c net.Conn, hand *handoff) {
	if s.open.Add(1) > int64(s.cfg.MaxConns) {
		s.open.Add(-1)
		s.refuse(c)
		return
	}
	cc := &countedConn{Conn: c, s: s}
	if !s.conns.add(cc) {
		cc.Close() // the server is stopping
		return
	}
	go s.serveConn(cc, hand, time.Now())
}

// refuse answers c 503 and closes it. It runs in the accept loop, so that a
// flood of connections costs no goroutine each: the answer fits the new
// connection's empty buffer, and its write cannot block. The client may
// be writing its request meanwhile: a socket closed with bytes unread
// still delivers what was written to it first. Refusals are logged at
// most once a minute.
func (s *Server) refuse(c net.Conn) {
	body := errorJSON(fmt.Sprintf("too many connections: %d are open, the most this daemon serves", s.cfg.MaxConns))
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	bufs := net.Buffers{appendAnswerHead(nil, http.StatusServiceUnavailable, len(body), true), body}
	bufs.WriteTo(c)
	c.Close()
	s.refused++
	if time.Since(s.refusedLogged) >= time.Minute {
		s.cfg.Logger.Warn("socket: connections over the cap refused", "max_connections", s.cfg.MaxConns, "refused", s.refused)
		s.refused, s.refusedLogged = 0, time.Now()
	}
}

// countedConn is an accepted connection, counted until it is closed
// (net/http may close it more than once).
type countedConn struct {
	net.Conn
	s      *Server
	closed atomic.Bool
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.s.conns.remove(c)
		c.s.open.Add(-1)
		select {
		case c.s.freed <- struct{}{}: // a descriptor is free: a failing Accept may retry now
		default:
		}
	}
	return err
}
