package unixsocket

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
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

// Tool calls written by hand, however framed (a length, chunked, Expect:
// 100-continue) and mixed on one connection with other routes, get the
// same answers; faults are JSON errors and the connection goes on serving.
func TestToolCallsOverRawHTTP(t *testing.T) {
	d := startDaemon(t, 0)
	if err := os.WriteFile(filepath.Join(d.ws, "f.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	body := `{"actor":"a","arguments":{"file_path":"f.txt"}}`
	plain := "POST /v1/tools/read HTTP/1.1\r\nHost: dshfs\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body
	chunked := "POST /v1/tools/read HTTP/1.1\r\nHost: dshfs\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
	status := "GET /v1/status HTTP/1.1\r\nHost: dshfs\r\n\r\n"

	rs := rawExchange(t, d.socket, plain, plain, status, plain)
	want := bodyOf(rs[0])
	if rs[0].StatusCode != 200 || !strings.Contains(want, `"text":"<path>`) || !strings.Contains(want, `"version":"b3:`) {
		t.Fatalf("answer %d %s", rs[0].StatusCode, want)
	}
	if got := bodyOf(rs[1]); got != want {
		t.Fatalf("second answer differs:\n%s\n%s", got, want)
	}
	if rs[2].StatusCode != 200 || !strings.Contains(bodyOf(rs[2]), `"backing"`) {
		t.Fatalf("status after tool calls: %d", rs[2].StatusCode)
	}
	if got := bodyOf(rs[3]); got != want {
		t.Fatalf("tool call after another route differs:\n%s\n%s", got, want)
	}
	rs = rawExchange(t, d.socket, chunked)
	if got := bodyOf(rs[0]); got != want {
		t.Fatalf("chunked tool call:\n%s\nwant\n%s", got, want)
	}
	expect := "POST /v1/tools/read HTTP/1.1\r\nHost: dshfs\r\nExpect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if got := bodyOf(rawExchange(t, d.socket, expect)[0]); got != want {
		t.Fatalf("Expect: 100-continue tool call:\n%s", got)
	}
	// Faults: JSON errors, and the connection keeps serving.
	bad := "POST /v1/tools/read HTTP/1.1\r\nHost: dshfs\r\nContent-Length: 5\r\n\r\n{oops"
	unknown := "POST /v1/tools/nope HTTP/1.1\r\nHost: dshfs\r\nContent-Length: 2\r\n\r\n{}"
	rs = rawExchange(t, d.socket, bad, unknown, plain)
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
