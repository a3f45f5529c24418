// Regression tests: each comment says what used to go wrong.

package unixsocket

import (
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

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

// The fast path sized a body's buffer from Content-Length before any of
// the body had come: a 70-byte head cost 64 MiB, and 32 connections that
// sent one and waited took the daemon from 290 MB to 1 GB. Now the buffer
// grows with what arrives: 64 such connections cost little, and nothing
// once they close.
func TestAnnouncedBodiesCostWhatIsSent(t *testing.T) {
	d := startDaemon(t, 0)
	const conns, limit = 64, 256 << 20
	heap0, rss0 := heapInUse(), residentBytes()
	head := "POST /v1/tools/write HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(DefaultMaxBody) + "\r\n\r\n{"
	var cs []net.Conn
	for range conns {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the daemon reads every head and the body's first byte
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
