package unixsocket

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawExchange writes requests on one connection and reads one answer each.
func rawExchange(t *testing.T, socket string, reqs ...string) []*http.Response {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	var out []*http.Response
	for _, r := range reqs {
		if _, err := io.WriteString(c, r); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		for err == nil && resp.StatusCode == http.StatusContinue {
			resp, err = http.ReadResponse(br, nil) // the answer follows
		}
		if err != nil {
			t.Fatalf("answer to %q: %v", r, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, resp)
	}
	return out
}

func bodyOf(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

// Tool calls the fast path takes and ones it hands to net/http (chunked,
// Expect: 100-continue, other routes, on the same connection after a fast
// one) get the same answers.
func TestFastPathAndHandOff(t *testing.T) {
	d := startDaemon(t, 0)
	if err := os.WriteFile(filepath.Join(d.ws, "f.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	body := `{"actor":"a","arguments":{"file_path":"f.txt"}}`
	fast := "POST /v1/tools/read HTTP/1.1\r\nHost: dshfs\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	chunked := "POST /v1/tools/read HTTP/1.1\r\nHost: dshfs\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
	status := "GET /v1/status HTTP/1.1\r\nHost: dshfs\r\n\r\n"

	rs := rawExchange(t, d.socket, fast, fast, status, fast)
	want := bodyOf(rs[0])
	if rs[0].StatusCode != 200 || !strings.Contains(want, `"text":"<path>`) || !strings.Contains(want, `"version":"b3:`) {
		t.Fatalf("fast answer %d %s", rs[0].StatusCode, want)
	}
	if got := bodyOf(rs[1]); got != want {
		t.Fatalf("second fast answer differs:\n%s\n%s", got, want)
	}
	if rs[2].StatusCode != 200 || !strings.Contains(bodyOf(rs[2]), `"backing"`) {
		t.Fatalf("status after fast calls: %d", rs[2].StatusCode)
	}
	if got := bodyOf(rs[3]); got != want {
		t.Fatalf("tool call served by net/http differs from the fast path:\n%s\n%s", got, want)
	}
	rs = rawExchange(t, d.socket, chunked)
	if got := bodyOf(rs[0]); got != want {
		t.Fatalf("chunked tool call:\n%s\nwant\n%s", got, want)
	}
	expect := "POST /v1/tools/read HTTP/1.1\r\nHost: dshfs\r\nExpect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if got := bodyOf(rawExchange(t, d.socket, expect)[0]); got != want {
		t.Fatalf("Expect: 100-continue tool call:\n%s", got)
	}
	// Faults on the fast path: the same JSON errors as net/http's route.
	bad := "POST /v1/tools/read HTTP/1.1\r\nHost: dshfs\r\nContent-Length: 5\r\n\r\n{oops"
	unknown := "POST /v1/tools/nope HTTP/1.1\r\nHost: dshfs\r\nContent-Length: 2\r\n\r\n{}"
	rs = rawExchange(t, d.socket, bad, unknown, fast)
	if rs[0].StatusCode != 400 || !strings.Contains(bodyOf(rs[0]), "malformed JSON") {
		t.Fatalf("malformed JSON: %d", rs[0].StatusCode)
	}
	if rs[1].StatusCode != 404 || bodyOf(rs[1]) != `{"error":"unknown tool \"nope\""}`+"\n" {
		t.Fatalf("unknown tool: %d", rs[1].StatusCode)
	}
	if got := bodyOf(rs[2]); got != want {
		t.Fatal("the connection did not keep serving after faults")
	}
}

// A deadline moves only once it has fallen a second behind.
func TestLazyDeadline(t *testing.T) {
	var sets []time.Time
	l := lazyDeadline{set: func(at time.Time) error { sets = append(sets, at); return nil }}
	l.extend(time.Minute)
	l.extend(time.Minute)
	if len(sets) != 1 || time.Until(sets[0]) < 59*time.Second {
		t.Fatalf("first extend: sets %v", sets)
	}
	l.extend(time.Minute + 2*time.Second)
	if len(sets) != 2 || !sets[1].After(sets[0].Add(time.Second)) {
		t.Fatalf("a deadline two seconds behind was not moved: sets %v", sets)
	}
}

// deadlineLog is a connection that records the read deadlines set on it.
type deadlineLog struct {
	io.Reader
	sets []time.Time
}

func (d *deadlineLog) SetReadDeadline(at time.Time) error { d.sets = append(d.sets, at); return nil }

// A read deadline is set only before a read, when the one set is later
// than wanted or over a second earlier; clear clears it once.
func TestDeadlineReader(t *testing.T) {
	c := &deadlineLog{Reader: strings.NewReader(strings.Repeat("x", 100))}
	d := deadlineReader{c: c}
	now := time.Now()
	d.want = now.Add(time.Minute)
	if len(c.sets) != 0 {
		t.Fatal("a deadline was set before any read")
	}
	p := make([]byte, 1)
	d.Read(p)
	d.want = now.Add(time.Minute + 500*time.Millisecond) // less than a second later: kept
	d.Read(p)
	d.want = now.Add(10 * time.Second) // earlier: set
	d.Read(p)
	d.want = now.Add(2 * time.Minute) // over a second later: set
	d.Read(p)
	d.clear()
	d.clear()
	want := []time.Time{now.Add(time.Minute), now.Add(10 * time.Second), now.Add(2 * time.Minute), {}}
	if !slices.Equal(c.sets, want) {
		t.Fatalf("deadlines set %v, want %v", c.sets, want)
	}
}

// A fast route's pattern is read once: its request line up to the
// wildcard, and the wildcard's name. Any other shape is refused.
func TestNewFastRoute(t *testing.T) {
	fr := newFastRoute(route{pattern: "POST /v1/tools/{name}"})
	if string(fr.line) != "POST /v1/tools/" || fr.wildcard != "name" {
		t.Fatalf("line %q, wildcard %q", fr.line, fr.wildcard)
	}
	for _, p := range []string{"POST /v1/tools", "POST /v1/{a}/x", "POST /v1/{a}/{b}", "/v1/tools/{name}", "POST /v1/tools/{}"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("pattern %q taken", p)
				}
			}()
			newFastRoute(route{pattern: p})
		}()
	}
}
