package unixsocket

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// The drain. A daemon stopping (SIGTERM, SIGINT, `dshfs unmount`) must not
// cut off a call it is running: the caller would not know whether its edit
// happened. Shutdown stops accepting, closes the connections waiting for a
// request, lets the calls under way answer, and tells the MCP sessions to
// end (each finishes the calls it is running first, see Config.MCP); only
// what is left when its context is done is cut off, and the calls' own
// contexts are cancelled then.

// cancelGrace is how long Shutdown still waits for the calls it cancelled.
const cancelGrace = 5 * time.Second

// tracker counts work under way and refuses new work once closed.
type tracker struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed when n falls to 0 after close
}

// begin counts one more, unless the tracker is closed.
func (t *tracker) begin() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.n++
	return true
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n--; t.n == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// close refuses new work; the channel is closed once none is under way.
func (t *tracker) close() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	ch := make(chan struct{})
	if t.n == 0 {
		close(ch)
	} else {
		t.idle = ch
	}
	return ch
}

// connSet is the connections the fast path serves, each idle (waiting for
// a request) or busy (answering one).
type connSet struct {
	mu       sync.Mutex
	draining bool
	conns    map[*countedConn]bool // true: busy
	calls    tracker
}

// add registers c; false: the server is draining (c is to be closed).
func (cs *connSet) add(c *countedConn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.draining {
		return false
	}
	if cs.conns == nil {
		cs.conns = map[*countedConn]bool{}
	}
	cs.conns[c] = false
	return true
}

// remove forgets c: closed, or handed to net/http.
func (cs *connSet) remove(c *countedConn) {
	cs.mu.Lock()
	delete(cs.conns, c)
	cs.mu.Unlock()
}

// busy marks c as answering a request it has read; false: the server is
// draining, and the request is not to be run.
func (cs *connSet) busy(c *countedConn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.draining || !cs.calls.begin() {
		return false
	}
	cs.conns[c] = true
	return true
}

// answered marks c idle again; true: the server is draining and c is to
// be closed.
func (cs *connSet) answered(c *countedConn) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.calls.done()
	if _, open := cs.conns[c]; open {
		cs.conns[c] = false
	}
	return cs.draining
}

// drain refuses new requests and returns the connections that were idle,
// for the caller to close, and a channel closed once no call is under way.
func (cs *connSet) drain() ([]*countedConn, <-chan struct{}) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.draining = true
	var idle []*countedConn
	for c, busy := range cs.conns {
		if !busy {
			idle = append(idle, c)
		}
	}
	return idle, cs.calls.close()
}

// all is every connection still open.
func (cs *connSet) all() []*countedConn {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]*countedConn, 0, len(cs.conns))
	for c := range cs.conns {
		out = append(out, c)
	}
	return out
}

// Shutdown stops serving: it closes the listener Serve was given and the
// connections waiting for a request, lets the calls under way answer and
// the MCP sessions end until ctx is done, then cancels what is left and
// waits for it a little longer (cancelGrace). It returns ctx's error if it
// had to cancel anything.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	l, hs := s.listener, s.hs
	s.mu.Unlock()
	if l != nil {
		l.Close()
	}
	idle, calls := s.conns.drain()
	for _, c := range idle {
		c.Close()
	}
	sessions := s.sessions.close()
	s.stop() // the MCP sessions are told to end
	var errs []error
	if hs != nil {
		errs = append(errs, ignoreClosed(hs.Shutdown(ctx)))
	}
	if waitAll(ctx, calls, sessions) {
		return errors.Join(errs...)
	}
	// Past the bound: cut off what is left.
	s.cancelCalls()
	if hs != nil {
		hs.Close()
	}
	for _, c := range s.conns.all() {
		c.Close()
	}
	grace, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	waitAll(grace, calls, sessions)
	return errors.Join(append(errs, ctx.Err())...)
}

// waitAll waits for every channel to be closed, or ctx to be done.
func waitAll(ctx context.Context, chs ...<-chan struct{}) bool {
	for _, ch := range chs {
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// busy reports whether work is under way.
func (t *tracker) busy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n > 0
}
