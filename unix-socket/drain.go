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
// request, lets the calls under way answer (the calls tracker counts every
// request's handler, an MCP session's included), and tells the MCP sessions
// to end (each finishes the calls it is running first, see Config.MCP);
// only what is left when its context is done is cut off, and the calls' own
// contexts (every request's base) are cancelled then.

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

// Shutdown stops serving: net/http stops accepting and closes the
// connections waiting for a request, the calls under way answer and the
// MCP sessions end until ctx is done; then what is left is cancelled and
// waited for a little longer (cancelGrace). It returns ctx's error if it
// had to cancel anything.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	hs := s.hs
	s.mu.Unlock()
	calls, sessions := s.calls.close(), s.sessions.close()
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
	grace, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	waitAll(grace, calls, sessions)
	return errors.Join(append(errs, ctx.Err())...)
}

// connState keeps the set of connections that have not sent a request; one
// that arrives while draining is closed at once.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st != http.StateNew {
		delete(s.fresh, c)
		return
	}
	if s.draining.Load() {
		c.Close()
		return
	}
	if s.fresh == nil {
		s.fresh = map[net.Conn]struct{}{}
	}
	s.fresh[c] = struct{}{}
}

// closeFresh closes the connections that have not sent a request: net/http
// would wait until each is 5 s old before it closed them.
func (s *Server) closeFresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.fresh {
		c.Close()
	}
	clear(s.fresh)
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
