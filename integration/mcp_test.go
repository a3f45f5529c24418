package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	pngenc "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// An MCP client built on the official SDK spawns `dshfs mcp`, lists the
// tools (schemas equal to GET /v1/tools), and runs read → write → edit →
// stale edit against a running mount.
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

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(dshfsBin, "mcp", "--mount", mnt)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	client := mcp.NewClient(&mcp.Implementation{Name: "dshfs-test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()

	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	socket, _ := filepath.Glob(filepath.Join(state, "dshfs", "*", "dshfs.sock"))
	defs, err := unixsocket.NewClient(socket[0]).Tools(ctx)
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
	for i, d := range defs {
		mt := byName[d.Name]
		if mt == nil {
			t.Fatalf("MCP does not list %q", d.Name)
		}
		var want, got any
		json.Unmarshal(d.InputSchema, &want)
		b, _ := json.Marshal(mt.InputSchema)
		json.Unmarshal(b, &got)
		if mt.Name != d.Name || mt.Description != d.Description || !reflect.DeepEqual(got, want) {
			t.Fatalf("tool %d: MCP %q %q %s, daemon %q %q %s", i, mt.Name, mt.Description, b, d.Name, d.Description, d.InputSchema)
		}
	}

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	text := func(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }
	path := filepath.Join(mnt, "f.txt")

	r := call("read", map[string]any{"file_path": path})
	if r.IsError || !strings.Contains(text(r), "1: hello mcp") {
		t.Fatalf("read: %v %q", r.IsError, text(r))
	}
	if sc, _ := r.StructuredContent.(map[string]any); sc == nil || !strings.HasPrefix(sc["version"].(string), "b3:") {
		t.Fatalf("read structuredContent: %#v", r.StructuredContent)
	}
	if r = call("write", map[string]any{"file_path": filepath.Join(mnt, "new.txt"), "content": "made over MCP\n"}); r.IsError {
		t.Fatalf("write: %q", text(r))
	}
	if r = call("edit", map[string]any{"file_path": path, "old_string": "hello", "new_string": "hi"}); r.IsError {
		t.Fatalf("edit: %q", text(r))
	}
	if err := os.WriteFile(path, []byte("changed by a shell\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = call("edit", map[string]any{"file_path": path, "old_string": "changed", "new_string": "x"})
	if !r.IsError || text(r) != `Error: cannot edit "`+path+`": file changed since it was read — re-read the file, then retry` {
		t.Fatalf("stale edit: %v %q", r.IsError, text(r))
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "new.txt")); string(b) != "made over MCP\n" {
		t.Fatalf("new.txt = %q", b)
	}

	// read_image: the envelope as text, then the image itself as an MCP
	// image block whose bytes are the file's; the structured value leaves
	// the bytes to the block.
	var png bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 12, 7))
	img.Set(3, 4, color.RGBA{R: 255, A: 255})
	if err := pngenc.Encode(&png, img); err != nil {
		t.Fatal(err)
	}
	pic := filepath.Join(mnt, "pic.png")
	if err := os.WriteFile(pic, png.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r = call("read_image", map[string]any{"file_path": pic})
	wantText := "<path>" + pic + "</path>\n<type>image</type>\n<content>\nimage/png image, 12x7 px, " +
		strconv.Itoa(png.Len()) + " bytes\n</content>"
	if r.IsError || len(r.Content) != 2 || text(r) != wantText {
		t.Fatalf("read_image: %v %d blocks, text %q", r.IsError, len(r.Content), text(r))
	}
	block, ok := r.Content[1].(*mcp.ImageContent)
	if !ok || block.MIMEType != "image/png" || !bytes.Equal(block.Data, png.Bytes()) {
		t.Fatalf("read_image block %#v is not the file's PNG", r.Content[1])
	}
	sc, _ := r.StructuredContent.(map[string]any)
	if sc == nil || sc["width"] != 12.0 || sc["height"] != 7.0 || !strings.HasPrefix(sc["version"].(string), "b3:") || sc["data"] != nil {
		t.Fatalf("read_image structuredContent: %#v", r.StructuredContent)
	}
	r = call("read_image", map[string]any{"file_path": filepath.Join(mnt, "new.txt")})
	if !r.IsError || len(r.Content) != 1 {
		t.Fatalf("read_image of a text file: %v %q", r.IsError, text(r))
	}

	// With the daemon gone, a call is a tool error the model can read, not
	// a protocol failure of the MCP server.
	if out, code := dshfs(t, state, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %s", out)
	}
	r = call("read", map[string]any{"file_path": path})
	if !r.IsError || !strings.HasPrefix(text(r), "Error: reach the dshfs daemon") {
		t.Fatalf("read with the daemon gone: %v %q", r.IsError, text(r))
	}
}
