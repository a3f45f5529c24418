// Each test's comment says what used to go wrong before it.

package unixsocket

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Nothing bounded how many connections the daemon kept open: each held a
// descriptor and a read buffer until it timed out, and enough of them ran
// the daemon out of descriptors. Now a connection over Config.MaxConns is
// answered 503 and closed at once, and one is served again when another
// closes.
func TestConnectionCap(t *testing.T) {
	d := startDaemonWith(t, Config{MaxConns: 4}, nil)
	var silent []net.Conn
	for range 4 {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	waitFor(t, 5*time.Second, "four open connections", func() bool { return d.srv.open.Load() == 4 })
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a connection over the cap: %v, want a 503", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "too many connections") {
		t.Fatalf("a connection over the cap: %d %s", resp.StatusCode, b)
	}
	_, err = d.client.Call(context.Background(), "read", ToolRequest{Actor: "a", Arguments: []byte(`{"file_path":"x"}`)})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusServiceUnavailable {
		t.Fatalf("a call over the cap: %v, want the daemon's 503", err)
	}
	silent[0].Close()
	waitFor(t, 5*time.Second, "a connection to close", func() bool { return d.srv.open.Load() == 3 })
	if _, err := d.client.Call(context.Background(), "read", ToolRequest{Actor: "a", Arguments: []byte(`{"file_path":"x"}`)}); err != nil {
		t.Fatalf("a call once a connection closed: %v", err)
	}
	// A connection handed to net/http counts until net/http closes it.
	d.client.CloseIdle()
	waitFor(t, 5*time.Second, "the call's connection to close", func() bool { return d.srv.open.Load() == 3 })
	if _, err := d.client.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := d.srv.open.Load(); n != 4 {
		t.Fatalf("%d connections open with net/http's idle one, want 4", n)
	}
	d.client.CloseIdle()
	waitFor(t, 5*time.Second, "net/http's connection to be closed and uncounted", func() bool { return d.srv.open.Load() == 3 })
}

// trickle writes s to c a byte every 20 ms until it is written or c fails.
func trickle(c net.Conn, s string) {
	for i := range len(s) {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// closedWithin reports whether the daemon closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// A client trickling its request held the connection for minutes: the
// fast path gave the head of each request two minutes (net/http gives it
// ten seconds) and the body two more. Now the head has timeouts.head from
// its first byte (from the accept, on a new connection) and the whole
// request timeouts.read, however the bytes trickle; waiting for the next
// request has timeouts.idle.
func TestSlowClientsAreCut(t *testing.T) {
	d := startDaemonWith(t, Config{}, func(s *Server) {
		s.timeouts = timeouts{head: 300 * time.Millisecond, read: 600 * time.Millisecond, idle: 900 * time.Millisecond}
	})
	os.WriteFile(filepath.Join(d.ws, "f.txt"), []byte("one\n"), 0o644)
	dial := func() net.Conn {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	body := `{"actor":"a","arguments":{"file_path":"f.txt"}}`
	call := "POST /v1/tools/read HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body

	c := dial() // a head trickled on a new connection
	go trickle(c, call)
	if t0 := time.Now(); !closedWithin(c, 3*time.Second) || time.Since(t0) > time.Second {
		t.Errorf("a trickled head held the connection %v", time.Since(t0))
	}

	c = dial() // a body trickled after a head sent at once
	head := "POST /v1/tools/read HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n"
	go func() { io.WriteString(c, head); trickle(c, strings.Repeat(" ", 200)) }()
	if t0 := time.Now(); !closedWithin(c, 3*time.Second) || time.Since(t0) > 1200*time.Millisecond {
		t.Errorf("a trickled body held the connection %v", time.Since(t0))
	}

	c = dial() // after an answer, the next request may wait longer than a head may take
	br := bufio.NewReader(c)
	for i := range 2 {
		if i > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		io.WriteString(c, call)
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("call %d: %v", i, err)
		} else {
			io.Copy(io.Discard, resp.Body)
		}
	}
	if t0 := time.Now(); !closedWithin(c, 3*time.Second) || time.Since(t0) > 1500*time.Millisecond {
		t.Errorf("an idle connection was held %v", time.Since(t0))
	}
}

// heapInUse is the heap in use after a collection, in bytes.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// residentBytes is VmRSS from /proc/self/status, or -1 where there is none.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return -1
}

// heapRetained is the heap memory the runtime holds from the OS (in use
// or free but not yet returned), read without forcing a collection. Unlike
// VmRSS it means the same under the race detector, whose shadow memory is
// never given back.
func heapRetained() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapSys - ms.HeapReleased)
}

// A chunked body over the limit, which net/http's route reads, took
// 160 MiB of memory to refuse (io.ReadAll's growth) and kept it until the
// runtime's next collection — two minutes away in an idle daemon. Now the
// buffer doubles up to the limit, and a large one is given back to the OS
// soon after it is done with. (No collection is forced here: the daemon
// must let the memory go by itself.)
func TestRefusedChunkedBodyLeavesNothing(t *testing.T) {
	d := startDaemon(t, 0)
	runtime.GC()
	debug.FreeOSMemory()
	held0 := heapRetained()
	body := io.MultiReader(strings.NewReader(`{"arguments":{"file_path":"big","content":"`),
		io.LimitReader(zeros{}, 100<<20), strings.NewReader(`"}}`))
	req, _ := http.NewRequest("POST", "http://dshfs/v1/tools/write", body)
	req.ContentLength = -1 // chunked
	resp, err := d.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	t.Logf("heap held from the OS after the answer: +%d MiB", (heapRetained()-held0)>>20)
	waitFor(t, 5*time.Second, "the body's memory to go back to the OS", func() bool { return heapRetained()-held0 < 32<<20 })
}
