package unixsocket

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// seenRequest is what a server made of one request: what the fast path
// read of it, or what net/http handed a handler.
type seenRequest struct {
	target string // the request target, as sent
	length int64
	close  bool
	body   string // as read in full ("" for a refused body)
}

// memConn is a connection whose bytes are in memory (for reqReader).
type memConn struct{ *bytes.Reader }

func (memConn) SetReadDeadline(time.Time) error { return nil }

// target is the request target of the request h is the head of.
func (h *head) target() string {
	_, prefix, _ := strings.Cut(string(h.route.line), " ")
	return prefix + h.value
}

// fastRead reads data as the fast path reads a connection: the requests it
// would answer, in order, what it then does (its verdict), and, on a
// hand-off, the bytes net/http gets.
func fastRead(data []byte) (seen []seenRequest, v verdict, handed []byte) {
	in := bytes.NewReader(data)
	r := newReqReader(memConn{in}, timeouts{idle: time.Hour, head: time.Hour, read: time.Hour}, time.Now(), NewServer(Config{}).fast)
	for {
		if v = r.readHead(DefaultMaxBody); v == serve {
			v = r.readBody()
		}
		if v == tooLarge {
			seen = append(seen, seenRequest{r.h.target(), r.h.contentLength, r.h.close, ""})
		}
		if v != serve {
			if v == handOff {
				rest, _ := io.ReadAll(in)
				handed = append(r.replay(), rest...)
			}
			return seen, v, handed
		}
		seen = append(seen, seenRequest{r.h.target(), r.h.contentLength, r.h.close, string(r.body)})
		if r.h.close {
			return seen, closeConn, nil
		}
	}
}

// recorder is a net/http server, with the daemon's settings, whose
// handler records every request it is given.
type recorder struct {
	conns chan net.Conn // the server's ends of the connections to serve
	mu    sync.Mutex
	seen  []seenRequest
}

var (
	recorderOnce sync.Once
	theRecorder  *recorder
)

func netHTTPRecorder() *recorder {
	recorderOnce.Do(func() {
		rec := &recorder{conns: make(chan net.Conn)}
		hs := NewServer(Config{Logger: slog.New(slog.DiscardHandler)}).httpServer()
		hs.Handler = http.HandlerFunc(rec.record)
		go hs.Serve(chanListener(rec.conns))
		theRecorder = rec
	})
	return theRecorder
}

// chanListener accepts the connections sent on it.
type chanListener chan net.Conn

func (l chanListener) Accept() (net.Conn, error) { return <-l, nil }
func (l chanListener) Close() error              { return nil }
func (l chanListener) Addr() net.Addr            { return &net.UnixAddr{Net: "unix"} }

// socketPair is two connected Unix sockets.
func socketPair(tb testing.TB) (a, b *net.UnixConn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		tb.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			tb.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

func (rec *recorder) record(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	seen := seenRequest{r.RequestURI, r.ContentLength, r.Close, string(b)}
	if err != nil {
		seen.body = ""
	}
	if r.Method != "POST" {
		seen.target = r.Method + " " + seen.target
	}
	rec.mu.Lock()
	rec.seen = append(rec.seen, seen)
	rec.mu.Unlock()
	w.Header().Set("Content-Length", "0")
}

// serve sends data on a new connection, closes the sending side, and
// returns the requests net/http handed its handler once it has closed the
// connection. Calls must not overlap.
func (rec *recorder) serve(tb testing.TB, data []byte) []seenRequest {
	rec.mu.Lock()
	rec.seen = nil
	rec.mu.Unlock()
	c, server := socketPair(tb)
	rec.conns <- server
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		c.Write(data)
		c.CloseWrite()
	}()
	if _, err := io.Copy(io.Discard, c); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			tb.Fatalf("net/http did not close the connection")
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.seen
}

// FuzzReadHead holds the fast path's reading of a connection to net/http's.
// For any bytes: every request the fast path would answer, http.ReadRequest
// (for the first) and net/http's server (for each) accept too, with the
// same target, Content-Length, close and body; when the fast path hands
// the connection on, net/http serves from the bytes it is handed exactly
// what it serves of the whole connection after those requests; when it
// closes the connection, net/http serves no more either.
func FuzzReadHead(f *testing.F) {
	for _, tc := range strictCases() {
		f.Add([]byte(tc.raw))
	}
	ok := toolCall("Host: dshfs\r\n", strictLength)
	for _, s := range []string{ok + "\r\n" + ok, ok + "\n\n\n\n" + ok, ok + "\r\n\r", "POST /v1/tools/edit HTTP/1.1\r\nhost: a:1\r\ncontent-length: 0\r\nconnection: keep-alive\r\n\r\n",
		"POST /v1/tools/write HTTP/1.1\r\nHost: x\r\nContent-Length: 67108865\r\n\r\n{", "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxHead/2 {
			// net/http's own header limit then depends on how the bytes
			// are split between its reads: TestLongHeaderLines covers it.
			t.Skip()
		}
		seen, v, handed := fastRead(data)
		if len(seen) > 0 {
			checkReadRequest(t, data, seen[0])
		}
		rec := netHTTPRecorder()
		served := rec.serve(t, data)
		for i, s := range seen {
			if i >= len(served) || served[i] != s && !(v == tooLarge && i == len(seen)-1 && sameHead(served[i], s)) {
				t.Fatalf("the fast path read request %d as %+v; net/http served %+v", i, s, served)
			}
		}
		switch v {
		case closeConn:
			if len(served) != len(seen) {
				t.Fatalf("the fast path closes after %d requests; net/http served %+v", len(seen), served)
			}
		case handOff:
			if rest := rec.serve(t, handed); !slices.Equal(rest, served[len(seen):]) {
				t.Fatalf("from the bytes handed on (%q) net/http served %+v; from the connection, %+v after the fast path's %d",
					handed, rest, served, len(seen))
			}
		}
	})
}

func sameHead(a, b seenRequest) bool {
	return a.target == b.target && a.length == b.length && a.close == b.close
}

// checkReadRequest checks that http.ReadRequest reads the start of data as
// the fast path read its first request.
func checkReadRequest(t *testing.T, data []byte, s seenRequest) {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
	if err != nil {
		t.Fatalf("the fast path takes %+v; http.ReadRequest: %v", s, err)
	}
	got := fmt.Sprintf("%s %s %d %v", req.Method, req.RequestURI, req.ContentLength, req.Close)
	if want := "POST " + s.target + " " + strconv.FormatInt(s.length, 10) + " " + strconv.FormatBool(s.close); got != want {
		t.Fatalf("http.ReadRequest read %q; the fast path %q", got, want)
	}
}
