package unixsocket

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The fast path sized a body's buffer from Content-Length before any of
// the body had come: a 70-byte head cost 64 MiB, and 32 connections that
// sent one and waited took the daemon from 290 MB to 1 GB. Now the buffer
// grows with what arrives: 64 such connections cost little, and nothing
// once they close.
func TestAnnouncedBodiesCostWhatIsSent(t *testing.T) {
	d := startDaemon(t, 0)
	const conns, limit = 64, 256 << 20
	heap0, rss0 := heapInUse(), residentBytes()
	head := "POST /v1/tools/write HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(DefaultMaxBody) + "\r\n\r\n"
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	// Each head, then the body's first byte: once the daemon has read
	// that byte, it has sized the buffer it read it into.
	for _, part := range []string{head, "{"} {
		for _, c := range cs {
			if _, err := io.WriteString(c, part); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 5*time.Second, "the daemon to read what was sent", func() bool { return unread(t, cs) == 0 })
	}
	heap, rss := heapInUse(), residentBytes()
	t.Logf("%d connections announcing %d MiB each: heap +%d KiB, resident +%d KiB",
		conns, DefaultMaxBody>>20, (heap-heap0)>>10, (rss-rss0)>>10)
	if heap-heap0 > limit || rss0 >= 0 && rss-rss0 > limit {
		t.Fatalf("heap grew %d MiB, resident memory %d MiB: the announced bodies were allocated", (heap-heap0)>>20, (rss-rss0)>>20)
	}
	for _, c := range cs {
		c.Close()
	}
	waitFor(t, 5*time.Second, "the buffers to be released", func() bool { return heapInUse()-heap0 < 16<<20 })
	if _, err := d.client.Tools(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// unread is how many bytes written to cs the daemon has not read yet.
func unread(t *testing.T, cs []net.Conn) (n int) {
	for _, c := range cs {
		raw, err := c.(*net.UnixConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		raw.Control(func(fd uintptr) {
			q, qerr := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
			if qerr != nil {
				t.Fatal(qerr)
			}
			n += q
		})
	}
	return n
}
