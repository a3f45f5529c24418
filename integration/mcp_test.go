package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	pngenc "image/png"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// An MCP client built on the official SDK spawns `dshfs mcp` against a
// running mount, through a recording proxy of the daemon's socket, and runs
// read → write → edit → stale edit → read_image. What reaches the client —
// and so, through a harness, the model — is exactly the socket's text as
// one text block (read_image: plus the image as an image block), and no
// structuredContent: Claude Code, Codex and OpenCode hand the model
// structuredContent in place of the text when a result has it.
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
		unix.Unmount(mnt, unix.MNT_DETACH)
	})
	if err := os.WriteFile(filepath.Join(mnt, "f.txt"), []byte("hello mcp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	socket, _ := filepath.Glob(filepath.Join(state, "dshfs", "ws-*", "dshfs.sock"))
	proxy := recordTools(t, socket[0])

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session := mcpSession(ctx, t, state, "--socket", proxy.socket, "--actor", "mcp-test")
	checkMCPTools(ctx, t, session, socket[0])

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if want := proxy.last(t); len(r.Content) == 0 || r.Content[0].(*mcp.TextContent).Text != want.Text || r.IsError != want.IsError {
			t.Fatalf("%s: MCP gave %v %#v; the socket said %v %q", name, r.IsError, r.Content, want.IsError, want.Text)
		}
		if r.StructuredContent != nil {
			t.Fatalf("%s: structuredContent %#v without --structured-content", name, r.StructuredContent)
		}
		return r
	}
	path := filepath.Join(mnt, "f.txt")
	for _, c := range []struct {
		tool string
		args map[string]any
		want string // a substring of the text, so the calls are the ones meant
	}{
		{"read", map[string]any{"file_path": path}, "1: hello mcp"},
		{"write", map[string]any{"file_path": filepath.Join(mnt, "new.txt"), "content": "made over MCP\n"}, "Created file"},
		{"edit", map[string]any{"file_path": path, "old_string": "hello", "new_string": "hi"}, "updated successfully"},
	} {
		if r := call(c.tool, c.args); r.IsError || len(r.Content) != 1 || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, c.want) {
			t.Fatalf("%s: %v %#v", c.tool, r.IsError, r.Content)
		}
	}
	if err := os.WriteFile(path, []byte("changed by a shell\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := call("edit", map[string]any{"file_path": path, "old_string": "changed", "new_string": "x"})
	if !r.IsError || len(r.Content) != 1 {
		t.Fatalf("stale edit: %v %#v", r.IsError, r.Content)
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "new.txt")); string(b) != "made over MCP\n" {
		t.Fatalf("new.txt = %q", b)
	}

	png := writePNG(t, filepath.Join(mnt, "pic.png"))
	r = call("read_image", map[string]any{"file_path": filepath.Join(mnt, "pic.png")})
	if r.IsError || len(r.Content) != 2 {
		t.Fatalf("read_image: %v, %d blocks", r.IsError, len(r.Content))
	}
	if block, ok := r.Content[1].(*mcp.ImageContent); !ok || block.MIMEType != "image/png" || !bytes.Equal(block.Data, png) {
		t.Fatalf("read_image block %#v is not the file's PNG", r.Content[1])
	}
	if r = call("read_image", map[string]any{"file_path": filepath.Join(mnt, "new.txt")}); !r.IsError || len(r.Content) != 1 {
		t.Fatalf("read_image of a text file: %v %#v", r.IsError, r.Content)
	}

	// For programs that want the value, --structured-content adds it; the
	// image's bytes stay in the image block only.
	session = mcpSession(ctx, t, state, "--socket", socket[0], "--structured-content")
	r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"file_path": path}})
	if sc, _ := r.StructuredContent.(map[string]any); err != nil || sc == nil || !strings.HasPrefix(sc["version"].(string), "b3:") {
		t.Fatalf("read with --structured-content: %#v, %v", r.StructuredContent, err)
	}
	r, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "read_image", Arguments: map[string]any{"file_path": filepath.Join(mnt, "pic.png")}})
	sc, _ := r.StructuredContent.(map[string]any)
	if err != nil || sc == nil || sc["width"] != 12.0 || sc["height"] != 7.0 || sc["data"] != nil || len(r.Content) != 2 {
		t.Fatalf("read_image with --structured-content: %#v, %v", r.StructuredContent, err)
	}

	// With the daemon gone, a call is a tool error the model can read, not
	// a protocol failure of the MCP server.
	if out, code := dshfs(t, state, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %s", out)
	}
	r, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"file_path": path}})
	if err != nil || !r.IsError || !strings.HasPrefix(r.Content[0].(*mcp.TextContent).Text, "Error: reach the dshfs daemon") {
		t.Fatalf("read with the daemon gone: %#v, %v", r, err)
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

// toolRecorder is a proxy of the daemon's socket that keeps the answer of
// the last tool call it carried.
type toolRecorder struct {
	socket string
	mu     sync.Mutex
	answer []byte
}

func recordTools(t *testing.T, socket string) *toolRecorder {
	t.Helper()
	rec := &toolRecorder{socket: filepath.Join(t.TempDir(), "proxy.sock")}
	l, err := net.Listen("unix", rec.socket)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "dshfs" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}},
		ModifyResponse: func(resp *http.Response) error {
			if !strings.HasPrefix(resp.Request.URL.Path, "/v1/tools/") {
				return nil
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body = io.NopCloser(bytes.NewReader(b))
			rec.mu.Lock()
			rec.answer = b
			rec.mu.Unlock()
			return err
		},
	}
	srv := &http.Server{Handler: proxy}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return rec
}

// last is the answer of the last tool call, as the socket sent it.
func (rec *toolRecorder) last(t *testing.T) unixsocket.ToolResult {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var r unixsocket.ToolResult
	if err := json.Unmarshal(rec.answer, &r); err != nil {
		t.Fatalf("the socket's answer %q: %v", rec.answer, err)
	}
	rec.answer = nil
	return r
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
