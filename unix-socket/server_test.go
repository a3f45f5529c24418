package unixsocket

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
)

type daemon struct {
	ws, socket string
	client     *Client
	hc         *http.Client // net/http's client, for requests Client does not make
	svc        *toolapi.Service
	store      *versionstore.Store
	pol        *policy.Policy
	srv        *Server
}

// startDaemon serves a fresh workspace on a socket in t.TempDir().
func startDaemon(t testing.TB, maxBody int64) *daemon {
	t.Helper()
	return startDaemonWith(t, Config{MaxBody: maxBody}, nil)
}

// startDaemonWith is startDaemon with cfg (its engine fields filled in
// here), tune run on the server before it serves, and wrap, if set, put
// around the listener.
func startDaemonWith(t testing.TB, cfg Config, tune func(*Server), wrap ...func(net.Listener) net.Listener) *daemon {
	t.Helper()
	d := &daemon{ws: t.TempDir(), socket: filepath.Join(t.TempDir(), "run", "dshfs.sock")}
	store, err := versionstore.Open(d.ws, filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.store = store
	pol, _ := policy.New(store.Observations(), policy.Options{})
	d.pol = pol
	d.svc, _ = toolapi.New(store, pol, toolapi.Config{})
	cfg.Tools, cfg.Store = d.svc, store
	cfg.Status = func() Status {
		acts, _ := pol.Activity() // as the daemon's own (daemon/serve.go)
		return Status{Backing: d.ws, Socket: d.socket,
			Actors: ActorSummary{Count: len(acts), Recent: acts[:min(len(acts), MaxRecentActors)]}}
	}
	cfg.RegisterProcess = func(actor string, pid int, _ uint32) error {
		if pid <= 0 {
			return fmt.Errorf("no process %d", pid)
		}
		return nil
	}
	if cfg.Branches == nil {
		cfg.Branches = fakeBranches{}
	}
	d.srv = NewServer(cfg)
	if tune != nil {
		tune(d.srv)
	}
	l, err := Listen(d.socket)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wrap {
		l = w(l)
	}
	done := make(chan error, 1)
	go func() { done <- d.srv.Serve(l) }()
	t.Cleanup(func() {
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		store.Close()
	})
	d.client = NewClient(d.socket)
	d.hc = httpClient(d.socket)
	t.Cleanup(d.hc.CloseIdleConnections)
	return d
}

// httpClient is a net/http client of the daemon at socket.
func httpClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx, socket) },
	}}
}

func (d *daemon) call(t *testing.T, actor, tool, args string) ToolResult {
	t.Helper()
	r, err := d.client.Call(context.Background(), tool, ToolRequest{Actor: actor, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestToolsOverSocket(t *testing.T) {
	d := startDaemon(t, 0)
	defs, err := d.client.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(d.svc.Tools())
	got, _ := json.Marshal(defs)
	if !bytes.Equal(got, want) {
		t.Fatalf("tools over the socket differ:\n%s\n%s", got, want)
	}
	path := filepath.Join(d.ws, "f.txt")
	if r := d.call(t, "a", "write", `{"file_path":"f.txt","content":"one\n"}`); r.IsError || !strings.Contains(r.Text, "Created file") {
		t.Fatalf("write: %+v", r)
	}
	os.WriteFile(path, []byte("changed\n"), 0o644)
	r := d.call(t, "a", "edit", `{"file_path":"f.txt","old_string":"changed","new_string":"x"}`)
	if !r.IsError || r.Error.Code != "FS_STALE_VERSION" ||
		r.Text != `Error: cannot edit "`+path+`": file changed since it was read — re-read the file, then retry` {
		t.Fatalf("stale edit: %+v", r)
	}
	r = d.call(t, "a", "read", `{"file_path":"f.txt"}`)
	var rv toolapi.ReadValue
	if r.IsError || json.Unmarshal(r.Value, &rv) != nil || rv.Version != versionstore.SumString("changed\n") {
		t.Fatalf("read: %+v", r)
	}
	h, err := d.client.History(context.Background(), "", "f.txt")
	if err != nil || len(h) != 2 || h[0].Writer.Kind != versionstore.WriterExternal || h[1].Writer.Actor != "a" {
		t.Fatalf("history: %+v %v", h, err)
	}
	st, err := d.client.Status(context.Background())
	if err != nil || st.Backing != d.ws || st.Ops["write"] != 1 || st.Ops["edit"] != 1 {
		t.Fatalf("status: %+v %v", st, err)
	}
}

// read_image over the socket: the value names the image and carries its
// bytes as base64 under "data".
func TestReadImageOverSocket(t *testing.T) {
	d := startDaemon(t, 0)
	var pic bytes.Buffer
	if err := png.Encode(&pic, image.NewGray(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.ws, "p.png"), pic.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r := d.call(t, "a", "read_image", `{"file_path":"p.png"}`)
	var v map[string]any
	if r.IsError || json.Unmarshal(r.Value, &v) != nil {
		t.Fatalf("read_image: %+v", r)
	}
	want := map[string]any{
		"path": filepath.Join(d.ws, "p.png"), "media_type": "image/png", "width": 3.0, "height": 2.0,
		"bytes": float64(pic.Len()), "version": versionstore.Sum(pic.Bytes()).String(),
		"data": base64.StdEncoding.EncodeToString(pic.Bytes()),
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("value:\n got %v\nwant %v", v, want)
	}
}

// Protocol faults are HTTP errors with a JSON body, and the daemon keeps
// serving after each.
func TestProtocolFaults(t *testing.T) {
	d := startDaemon(t, 1<<20)
	raw := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, "http://dshfs"+path, strings.NewReader(body))
		resp, err := d.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"POST", "/v1/tools/read", `{"arguments":`, 400, "malformed JSON"},
		{"POST", "/v1/tools/nope", `{"arguments":{}}`, 404, `unknown tool \"nope\"`},
		{"GET", "/v1/nothing", "", 404, "no route GET /v1/nothing"},
		{"DELETE", "/v1/tools", "", 404, "no route"},
		{"POST", "/v1/tools/write", `{"arguments":{"file_path":"big","content":"` + strings.Repeat("x", 2<<20) + `"}}`, 413, "request body over"},
		{"GET", "/v1/history", "", 400, "history needs ?path="},
		{"GET", "/v1/history?path=../x", "", 400, "outside the workspace"},
	} {
		code, body := raw(tc.method, tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.msg) {
			t.Errorf("%s %s: %d %s, want %d containing %q", tc.method, tc.path, code, body, tc.code, tc.msg)
		}
	}
	// Wrong argument types and escapes are tool errors, HTTP 200.
	if r := d.call(t, "a", "read", `{"file_path":1}`); !r.IsError || r.Text != `Error: invalid arguments: "file_path" must be a string` {
		t.Fatalf("wrong type: %+v", r)
	}
	if r := d.call(t, "a", "read", `{"file_path":"a\u0000b"}`); !r.IsError {
		t.Fatalf("NUL path: %+v", r)
	}
	if _, err := d.client.Tools(context.Background()); err != nil {
		t.Fatalf("daemon stopped serving: %v", err)
	}
}

// Many concurrent connections, and clients that connect and send nothing,
// do not stop the daemon from answering.
func TestConcurrentAndSilentClients(t *testing.T) {
	d := startDaemon(t, 0)
	var silent []net.Conn
	for range 50 {
		c, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for range 1000 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := d.client.Tools(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestListenSocketModesAndStaleSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	path := filepath.Join(dir, "s.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	di, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Fatalf("socket %v, dir %v", fi.Mode().Perm(), di.Mode().Perm())
	}
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "another dshfs") {
		t.Fatalf("second listener on a live socket: %v", err)
	}
	l.Close()
	// A socket file nobody listens on is replaced.
	if err := os.WriteFile(path+".x", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path + ".x"); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file at the path: %v", err)
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	ul.Close() // leaves a stale socket file
	l2, err := Listen(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
}

// A peer running as another user is refused even when the socket's mode
// would let it connect. As root the test connects as uid 65534 through
// curl under setpriv.
func TestOtherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root in CI")
		}
		t.Skip("needs root to switch uid")
	}
	for _, tool := range []string{"setpriv", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	d := startDaemon(t, 0)
	// Open the way so that only the peer check stands in it: the test's own
	// directories only, and put back as they were. (Walking up to / once
	// took /tmp's sticky bit off, which Perm() drops, for the whole machine.)
	for p := d.socket; p != "/" && p != filepath.Clean(os.TempDir()); p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			mode := fi.Mode() & (os.ModePerm | os.ModeSticky | os.ModeSetgid | os.ModeSetuid)
			os.Chmod(p, mode|0o011)
			t.Cleanup(func() { os.Chmod(p, mode) })
		}
	}
	os.Chmod(d.socket, 0o666)
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"curl", "-s", "--max-time", "5", "--unix-socket", d.socket, "http://dshfs/v1/tools").CombinedOutput()
	if err == nil || strings.Contains(string(out), "read") {
		t.Fatalf("another user was served: %v %s", err, out)
	}
	// The owner still is.
	if _, err := d.client.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A 100 MiB body is refused with 413 under the default 64 MiB cap, and the
// daemon goes on serving.
func TestHundredMiBBody(t *testing.T) {
	d := startDaemon(t, 0)
	body := io.MultiReader(strings.NewReader(`{"arguments":{"file_path":"big","content":"`),
		io.LimitReader(zeros{}, 100<<20), strings.NewReader(`"}}`))
	req, _ := http.NewRequest("POST", "http://dshfs/v1/tools/write", body)
	resp, err := d.hc.Do(req)
	if err == nil {
		defer resp.Body.Close()
	}
	if err == nil && resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(d.ws, "big")); !os.IsNotExist(err) {
		t.Fatal("the oversized write landed")
	}
	if _, err := d.client.Tools(context.Background()); err != nil {
		t.Fatalf("daemon stopped serving: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// Over the socket as in-process: an actor name the index could not key
// observations by is refused before the tool runs, and a rewind or restore
// by one is refused before it changes anything.
func TestLongActorRefusedBeforeAnyChange(t *testing.T) {
	d := startDaemon(t, 0)
	long := strings.Repeat("x", 40000)
	r := d.call(t, long, "write", `{"file_path":"new.txt","content":"x"}`)
	if !r.IsError || r.Text != "Error: actor must be at most 256 bytes" {
		t.Fatalf("write as a 40,000-byte actor: %+v", r)
	}
	if _, err := os.Lstat(filepath.Join(d.ws, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused write created the file (%v)", err)
	}
	os.WriteFile(filepath.Join(d.ws, "f.txt"), []byte("one\n"), 0o644)
	r = d.call(t, "a", "read", `{"file_path":"f.txt"}`)
	var rv toolapi.ReadValue
	json.Unmarshal(r.Value, &rv)
	ctx := context.Background()
	if _, err := d.client.Checkpoint(ctx, "before", nil); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.ws, "f.txt"), []byte("two\n"), 0o644)
	if _, err := d.client.Restore(ctx, RestoreRequest{Path: "f.txt", Version: rv.Version.String(), Actor: long}); err == nil {
		t.Fatal("restore by a 40,000-byte actor succeeded")
	}
	if _, err := d.client.Rewind(ctx, RewindRequest{Checkpoint: "before", Actor: long}, nil); err == nil {
		t.Fatal("rewind by a 40,000-byte actor succeeded")
	}
	if b, _ := os.ReadFile(filepath.Join(d.ws, "f.txt")); string(b) != "two\n" {
		t.Fatalf("f.txt = %q after refused restore and rewind", b)
	}
}
