// Each test's comment says what used to go wrong before it.

package unixsocket

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// The client's own pool put its connection back before it decoded the
// answer, and a caller whose context ended in that window (a deadline
// expiring while a large answer was decoded) broke the connection another
// call had already taken from the pool: that call failed with an i/o
// timeout though its own context was fine — after its request may have
// been carried out. Here the context ends while the answer is read, and
// the next call must be unharmed.
func TestCancelDoesNotBreakAPooledConn(t *testing.T) {
	sock := rawServer(t, func(c net.Conn, req *http.Request) bool {
		io.Copy(io.Discard, req.Body)
		return answerOK(c)
	})
	p := NewClient(sock)
	defer p.CloseIdle()
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	post(ctxA, p, "/fast", func(io.Reader) error {
		cancelA() // A's caller gives up just as A finishes
		return nil
	})
	if err := post(context.Background(), p, "/slow", nop); err != nil {
		t.Fatalf("a call after another call's context ended: %v", err)
	}
}

// The call pool hands out an idle connection without checking that the
// daemon still holds its end. After the daemon restarts (dshfs unmount and
// mount, or a crash and remount) the next call of a long-lived client such
// as `dshfs mcp` fails ("broken pipe" / EOF) although the new daemon is up
// and the request never reached anyone. net/http's Transport, used before
// for tool calls and still for every other route, drops a connection the
// server closed and dials again.
func TestPooledConnAfterDaemonRestart(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	serve := func() *http.Server {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "13")
			w.Write([]byte(`{"text":"ok"}`))
		})}
		go hs.Serve(l)
		return hs
	}
	first := serve()
	p := NewClient(sock)
	defer p.CloseIdle()
	if err := post(context.Background(), p, "/v1/tools/read", nop); err != nil {
		t.Fatal(err)
	}
	first.Close()     // the daemon goes away, closing its connections
	second := serve() // and a new one listens on the same socket
	defer second.Close()
	if err := post(context.Background(), p, "/v1/tools/read", nop); err != nil {
		t.Fatalf("first call after the daemon restarted: %v", err)
	}
}

// A request is sent again only when it could not be written. One the
// daemon received and then failed to answer (it went away mid-call) may
// have been carried out, so it is reported, never repeated: a repeated
// write or edit would land twice.
func TestReceivedRequestIsNotRepeated(t *testing.T) {
	var requests atomic.Int32
	sock := rawServer(t, func(c net.Conn, req *http.Request) bool {
		io.Copy(io.Discard, req.Body)
		if requests.Add(1) > 1 {
			return false // received, then gone without an answer
		}
		return answerOK(c)
	})
	p := NewClient(sock)
	defer p.CloseIdle()
	if err := post(context.Background(), p, "/v1/tools/edit", nop); err != nil {
		t.Fatal(err)
	}
	if err := post(context.Background(), p, "/v1/tools/edit", nop); err == nil {
		t.Fatal("a call the daemon never answered succeeded")
	}
	// A request sent again would have been counted before the call
	// returned: the daemon counts each before it closes without an answer.
	if n := requests.Load(); n != 2 {
		t.Fatalf("the daemon received %d requests, want 2: the unanswered one was sent again", n)
	}
}

// A body over the daemon's limit is answered 413 before it is read, and the
// connection closed: the client's write then fails. The typed client
// reported the broken pipe instead of the answer, and on a pooled
// connection sent the whole body again on a new one, as if the daemon had
// never seen it.
func TestOversizedBodyGetsTheAnswer(t *testing.T) {
	d := startDaemon(t, 1024)
	big := json.RawMessage(`{"file_path":"big","content":"` + strings.Repeat("x", 4<<20) + `"}`)
	check := func(what string) {
		_, err := d.client.Call(context.Background(), "write", ToolRequest{Actor: "a", Arguments: big})
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusRequestEntityTooLarge || !strings.Contains(apiErr.Message, "request body over 1024 bytes") {
			t.Fatalf("%s: %v, want the daemon's 413", what, err)
		}
	}
	check("on a new connection")
	d.call(t, "a", "read", `{"file_path":"nothing"}`) // leaves a connection in the pool
	check("on a pooled connection")
	if _, err := os.Stat(filepath.Join(d.ws, "big")); !os.IsNotExist(err) {
		t.Fatalf("the refused write landed: %v", err)
	}

	// The same against a bare server that counts requests: the refused
	// request is not sent twice.
	var heads atomic.Int32
	sock := rawServer(t, func(c net.Conn, req *http.Request) bool {
		heads.Add(1)
		if req.ContentLength > 1024 {
			c.Write([]byte("HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 16\r\nConnection: close\r\n\r\n{\"error\":\"big\"}\n"))
			return false
		}
		io.Copy(io.Discard, req.Body)
		return answerOK(c)
	})
	p := NewClient(sock)
	defer p.CloseIdle()
	if err := post(context.Background(), p, "/v1/tools/read", nop); err != nil {
		t.Fatal(err)
	}
	err := p.do(context.Background(), request{method: "POST", target: "/v1/tools/write", body: big}, nop)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized request on a pooled connection: %v, want the 413", err)
	}
	if n := heads.Load(); n != 2 {
		t.Fatalf("the server read %d request heads, want 2: the refused request was sent again", n)
	}
}

// post sends {} to target with c, the body of a 200 answer to read.
func post(ctx context.Context, c *Client, target string, read func(io.Reader) error) error {
	return c.do(ctx, request{method: "POST", target: target, body: []byte(`{}`)}, read)
}

func nop(io.Reader) error { return nil }

// answerOK answers a rawServer's request 200 and keeps the connection.
func answerOK(c net.Conn) bool {
	c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{\"text\":\"ok\"}"))
	return true
}

// rawServer serves HTTP/1.1 on a Unix socket by hand: answer is given each
// request, its head read and its body not, and keeps the connection while
// it returns true. It returns the socket's path.
func rawServer(t *testing.T, answer func(c net.Conn, req *http.Request) bool) string {
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil || !answer(c, req) {
						return
					}
				}
			}()
		}
	}()
	return sock
}
