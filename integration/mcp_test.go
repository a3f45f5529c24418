package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	pngenc "image/png"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// An MCP client built on the official SDK spawns `dshfs mcp` against a
// running mount and runs read → write → edit → stale edit → read_image,
// while the same calls go over the socket on a mirror of the files. What
// reaches the client — and so, through a harness, the model — is exactly
// the socket's text as one text block (read_image: plus the image as an
// image block), and no structuredContent: Claude Code, Codex and OpenCode
// hand the model structuredContent in place of the text when a result has
// it. Both ways `dshfs mcp` serves are checked: handing the session to the
// daemon, and relaying each call over the socket (a daemon that does not
// take sessions).
func TestMCP(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), t.TempDir()
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, code := dshfs(t, state, "mount", backing, mnt); code != 0 {
		t.Fatalf("mount: %s", out)
	}
	t.Cleanup(func() {
		dshfs(t, state, "unmount", mnt)
		unix.Unmount(mnt, mntDetach)
	})
	socket, _ := filepath.Glob(filepath.Join(state, "dshfs", "*", "dshfs.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	daemon := unixsocket.NewClient(socket[0])
	for _, mode := range []struct {
		name, socket string
		sessions     int64 // the daemon has served, after
	}{{"handed over", socket[0], 1}, {"relayed", noSessions(t, socket[0]), 1}} {
		t.Run(mode.name, func(t *testing.T) {
			session := mcpSession(ctx, t, state, "--socket", mode.socket)
			checkMCPTools(ctx, t, session, socket[0])
			mirrorMCP(ctx, t, session, daemon, filepath.Join(mnt, strings.ReplaceAll(mode.name, " ", "-")))
			if st, err := daemon.Status(ctx); err != nil || st.Ops["mcp"] != mode.sessions {
				t.Fatalf("the daemon served %d sessions (%v), want %d", st.Ops["mcp"], err, mode.sessions)
			}
		})
	}

	// For programs that want the value, --structured-content adds it; the
	// image's bytes stay in the image block only.
	session := mcpSession(ctx, t, state, "--socket", socket[0], "--structured-content")
	path, pic := filepath.Join(mnt, "s.txt"), filepath.Join(mnt, "s.png")
	os.WriteFile(path, []byte("structured\n"), 0o644)
	writePNG(t, pic)
	r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"file_path": path}})
	if sc, _ := r.StructuredContent.(map[string]any); err != nil || sc == nil || !strings.HasPrefix(sc["version"].(string), "b3:") {
		t.Fatalf("read with --structured-content: %#v, %v", r.StructuredContent, err)
	}
	r, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "read_image", Arguments: map[string]any{"file_path": pic}})
	sc, _ := r.StructuredContent.(map[string]any)
	if err != nil || sc == nil || sc["width"] != 12.0 || sc["height"] != 7.0 || sc["data"] != nil || len(r.Content) != 2 {
		t.Fatalf("read_image with --structured-content: %#v, %v", r.StructuredContent, err)
	}

	// With the daemon gone, the session goes on: a call is a tool error the
	// model can read, not a protocol failure of the MCP server.
	if out, code := dshfs(t, state, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %s", out)
	}
	r, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"file_path": path}})
	if err != nil || !r.IsError || !strings.HasPrefix(r.Content[0].(*mcp.TextContent).Text, "Error: reach the dshfs daemon") {
		t.Fatalf("read with the daemon gone: %#v, %v", r, err)
	}
}

// mirrorMCP runs the same calls through session on dir/mcp and over the
// socket on dir/socket, and checks that each MCP result is the socket's
// text as one text block (read_image: and the file's image) and nothing
// else.
func mirrorMCP(ctx context.Context, t *testing.T, session *mcp.ClientSession, client *unixsocket.Client, dir string) {
	t.Helper()
	sides := map[string]string{"mcp": filepath.Join(dir, "mcp"), "socket": filepath.Join(dir, "socket")}
	var png []byte
	for _, d := range sides {
		must(t, os.MkdirAll(d, 0o755))
		must(t, os.WriteFile(filepath.Join(d, "f.txt"), []byte("hello mcp\n"), 0o644))
		png = writePNG(t, filepath.Join(d, "pic.png"))
	}
	call := func(tool string, args func(dir string) map[string]any) *mcp.CallToolResult {
		t.Helper()
		raw, _ := json.Marshal(args(sides["socket"]))
		want, err := client.Call(ctx, tool, unixsocket.ToolRequest{Actor: "socket-side", Arguments: raw})
		must(t, err)
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args(sides["mcp"])})
		must(t, err)
		wantText := strings.ReplaceAll(want.Text, sides["socket"], sides["mcp"])
		if len(r.Content) == 0 || r.Content[0].(*mcp.TextContent).Text != wantText || r.IsError != want.IsError {
			t.Fatalf("%s: MCP gave %v %#v; the socket said %v %q", tool, r.IsError, r.Content, want.IsError, wantText)
		}
		if r.StructuredContent != nil {
			t.Fatalf("%s: structuredContent %#v without --structured-content", tool, r.StructuredContent)
		}
		return r
	}
	file := func(name string) func(string) map[string]any {
		return func(d string) map[string]any { return map[string]any{"file_path": filepath.Join(d, name)} }
	}
	edit := func(from, to string) func(string) map[string]any {
		return func(d string) map[string]any {
			return map[string]any{"file_path": filepath.Join(d, "f.txt"), "old_string": from, "new_string": to}
		}
	}
	if r := call("read", file("f.txt")); r.IsError || len(r.Content) != 1 {
		t.Fatalf("read: %#v", r)
	}
	write := func(d string) map[string]any {
		return map[string]any{"file_path": filepath.Join(d, "new.txt"), "content": "made over MCP\n"}
	}
	if r := call("write", write); r.IsError || len(r.Content) != 1 {
		t.Fatalf("write: %#v", r)
	}
	if r := call("edit", edit("hello", "hi")); r.IsError || len(r.Content) != 1 {
		t.Fatalf("edit: %#v", r)
	}
	for _, d := range sides {
		must(t, os.WriteFile(filepath.Join(d, "f.txt"), []byte("changed by a shell\n"), 0o644))
	}
	if r := call("edit", edit("changed", "x")); !r.IsError || len(r.Content) != 1 {
		t.Fatalf("stale edit: %#v", r)
	}
	r := call("read_image", file("pic.png"))
	if r.IsError || len(r.Content) != 2 {
		t.Fatalf("read_image: %v, %d blocks", r.IsError, len(r.Content))
	}
	if block, ok := r.Content[1].(*mcp.ImageContent); !ok || block.MIMEType != "image/png" || !bytes.Equal(block.Data, png) {
		t.Fatalf("read_image block %#v is not the file's PNG", r.Content[1])
	}
	if r := call("read_image", file("new.txt")); !r.IsError || len(r.Content) != 1 {
		t.Fatalf("read_image of a text file: %#v", r)
	}
}

// mcpSession starts `dshfs mcp` with args and connects the SDK's client.
func mcpSession(ctx context.Context, t *testing.T, state string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(dshfsBin, append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	client := mcp.NewClient(&mcp.Implementation{Name: "dshfs-test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

// checkMCPTools checks that MCP lists the daemon's tools — names,
// descriptions, schemas — with titles and the MCP reference filesystem
// server's hints: read-only for reading, destructive for writing, and a
// closed world for all.
func checkMCPTools(ctx context.Context, t *testing.T, session *mcp.ClientSession, socket string) {
	t.Helper()
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := unixsocket.NewClient(socket).Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != len(defs) {
		t.Fatalf("%d MCP tools, %d daemon tools", len(tools.Tools), len(defs))
	}
	byName := map[string]*mcp.Tool{}
	for _, mt := range tools.Tools {
		byName[mt.Name] = mt
	}
	hints := map[string]struct{ readOnly, destructive bool }{
		"read": {true, false}, "read_image": {true, false}, "write": {false, true}, "edit": {false, true}}
	for _, d := range defs {
		mt := byName[d.Name]
		if mt == nil {
			t.Fatalf("MCP does not list %q", d.Name)
		}
		var want, got any
		json.Unmarshal(d.InputSchema, &want)
		b, _ := json.Marshal(mt.InputSchema)
		json.Unmarshal(b, &got)
		if mt.Description != d.Description || !reflect.DeepEqual(got, want) || mt.Title == "" || mt.Title != d.Title {
			t.Fatalf("tool %s: MCP %q %q %s, daemon %q %q %s", d.Name, mt.Title, mt.Description, b, d.Title, d.Description, d.InputSchema)
		}
		a, h := mt.Annotations, hints[d.Name]
		if a == nil || a.ReadOnlyHint != h.readOnly || a.DestructiveHint == nil || *a.DestructiveHint != h.destructive ||
			a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Fatalf("tool %s annotations %+v, want readOnly %v, destructive %v, openWorld false", d.Name, a, h.readOnly, h.destructive)
		}
	}
}

// noSessions is a proxy of the daemon's socket that refuses MCP sessions,
// as a daemon from before they were handed over does: `dshfs mcp` then
// relays each call itself.
func noSessions(t *testing.T, socket string) string {
	t.Helper()
	proxySocket := filepath.Join(t.TempDir(), "proxy.sock")
	l, err := net.Listen("unix", proxySocket)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "dshfs" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}},
	}
	mux := http.NewServeMux()
	mux.Handle("/", proxy)
	mux.HandleFunc("POST /v1/mcp", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return proxySocket
}

// writePNG writes a 12×7 PNG at path and returns its bytes.
func writePNG(t *testing.T, path string) []byte {
	t.Helper()
	var png bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 12, 7))
	img.Set(3, 4, color.RGBA{R: 255, A: 255})
	if err := pngenc.Encode(&png, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return png.Bytes()
}

// A harness runs the agent's shell commands as its children: a write
// through the mount by any descendant of the process that started a `dshfs
// mcp` session is that session's actor's, beside its pid and command. A
// harness on the socket registers a process for an actor the same way.
func TestShellWritesAreTheSessionsActors(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), t.TempDir()
	must(t, os.Mkdir(mnt, 0o755))
	if out, code := dshfs(t, state, "mount", backing, mnt); code != 0 {
		t.Fatalf("mount: %s", out)
	}
	t.Cleanup(func() {
		dshfs(t, state, "unmount", mnt)
		unix.Unmount(mnt, mntDetach)
	})
	socket, _ := filepath.Glob(filepath.Join(state, "dshfs", "*", "dshfs.sock"))
	client := unixsocket.NewClient(socket[0])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The history waits up to 250 ms for the shell's release, which
	// commits its write and which the kernel sends after the shell exited;
	// a loaded machine may send it later still.
	writer := func(file string) versionstore.Writer {
		t.Helper()
		var h []versionstore.HistoryEntry
		var err error
		testfuse.WaitFor(10*time.Second, func() bool {
			h, err = client.History(ctx, "", filepath.Join(mnt, file))
			return err != nil || len(h) > 0
		})
		if err != nil || len(h) == 0 {
			t.Fatalf("history of %s: %+v, %v", file, h, err)
		}
		return h[0].Writer
	}

	// This test is the harness: it starts the session, then a shell.
	mcpSession(ctx, t, state, "--socket", socket[0], "--actor", "A")
	sh := exec.Command("sh", "-c", "echo by the agent shell > "+filepath.Join(mnt, "a.txt"))
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("sh: %v %s", err, out)
	}
	if w := writer("a.txt"); w.Kind != versionstore.WriterMount || w.Actor != "A" || w.Comm != "sh" || w.Pid == 0 {
		t.Fatalf("a.txt written by %+v, want the mount, sh, for A", w)
	}

	// A harness on the socket registers the process that runs its shell.
	shell := exec.Command("sh", "-c", "read go; echo by B shell > "+filepath.Join(mnt, "b.txt"))
	stdin, err := shell.StdinPipe()
	must(t, err)
	must(t, shell.Start())
	must(t, client.RegisterProcess(ctx, "B", shell.Process.Pid))
	stdin.Write([]byte("go\n"))
	must(t, shell.Wait())
	if w := writer("b.txt"); w.Actor != "B" || w.Comm != "sh" {
		t.Fatalf("b.txt written by %+v, want sh for B, the nearest registered ancestor", w)
	}
}
