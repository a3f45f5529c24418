package unixsocket

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// A client made for a peer sends nothing to a socket that is not that
// peer's: the socket file must belong to the peer's user, and the process
// that listens on it must run as that user with the peer's pid. Another
// user's mount can name any socket and any pid.
func TestClientChecksItsPeer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the socket file is given to another user")
	}
	var requests, conns atomic.Int64
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
			conns.Add(1)
			go func() {
				defer c.Close()
				var b [1]byte
				if n, _ := c.Read(b[:]); n > 0 {
					requests.Add(1)
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
				}
			}()
		}
	}()
	ctx := context.Background()
	me := Peer{UID: os.Geteuid(), Pid: os.Getpid()}
	var want int64 // connections the cases so far must have made
	for _, tc := range []struct {
		name    string
		owner   int // the socket file's owner
		peer    Peer
		connect bool // the connection is made (then dropped unused)
	}{
		{"another pid", me.UID, Peer{UID: me.UID, Pid: 1}, true},
		{"another user's socket file", me.UID, Peer{UID: 65534, Pid: me.Pid}, false},
		{"a socket file given to the peer's user, served by another", 65534, Peer{UID: 65534, Pid: me.Pid}, true},
	} {
		if err := os.Lchown(sock, tc.owner, -1); err != nil {
			t.Fatal(err)
		}
		before := conns.Load()
		_, err := NewClientFor(sock, tc.peer).Status(ctx)
		if !errors.Is(err, ErrWrongPeer) {
			t.Errorf("%s: %v, want %v", tc.name, err, ErrWrongPeer)
		}
		_, err = NewClientFor(sock, tc.peer).OpenMCP(ctx, MCPRequest{}, os.Stdin, os.Stdout)
		if !errors.Is(err, ErrWrongPeer) {
			t.Errorf("%s: OpenMCP: %v, want %v", tc.name, err, ErrWrongPeer)
		}
		if tc.connect {
			want += 2 // Status's and OpenMCP's, each dropped unused
		}
		// The accepts lag the dials: wait for those expected, so that a
		// late one is not taken for the next case's.
		testfuse.WaitFor(10*time.Second, func() bool { return conns.Load() >= want })
		if made := conns.Load() > before; !tc.connect && made {
			t.Errorf("%s: the client connected", tc.name)
		}
	}
	if n := conns.Load(); n != want {
		t.Errorf("%d connections reached the socket, want %d: a case that must not connect did", n, want)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests reached a socket that is not the peer's", n)
	}
	if err := os.Lchown(sock, me.UID, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := NewClientFor(sock, me).Status(ctx); err != nil {
		t.Fatalf("the peer itself: %v", err)
	}
	if requests.Load() != 1 {
		t.Fatalf("%d requests reached the peer, want 1", requests.Load())
	}
}
