package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// An orchestrating model's loop through `dshfs mcp --branch-tools`, with
// the SDK's client on a real mount: two branches made by branch_new, an
// agent's shell writes in each, branch_list and branch_diff seeing them
// without changing the workspace, the first merge applied, the second
// refused with the conflict's three versions and nothing of it applied,
// then merged in part. Without the flag the session lists the workspace
// tools alone (TestMCP).
func TestMCPBranchTools(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), t.TempDir()
	must(t, os.Mkdir(mnt, 0o755))
	must(t, os.WriteFile(filepath.Join(backing, "notes.txt"), []byte("one\n"), 0o644))
	if out, code := dshfs(t, state, "mount", backing, mnt); code != 0 {
		t.Fatalf("mount: %s", out)
	}
	t.Cleanup(func() {
		dshfs(t, state, "unmount", mnt)
		unix.Unmount(mnt, mntDetach)
	})
	t.Cleanup(func() { // first: a branch's mount is in mnt's directory
		for _, b := range []string{"a", "b"} {
			dshfs(t, state, "branch", "drop", "--force", "--mount", mnt, b)
		}
	})
	socket, _ := filepath.Glob(filepath.Join(state, "dshfs", "*", "dshfs.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session := mcpSession(ctx, t, state, "--socket", socket[0], "--branch-tools")
	checkBranchToolList(ctx, t, session, socket[0])

	call := func(tool string, args map[string]any) (string, bool) {
		t.Helper()
		r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || len(r.Content) != 1 || r.StructuredContent != nil {
			t.Fatalf("%s %v: %#v, %v", tool, args, r, err)
		}
		return r.Content[0].(*mcp.TextContent).Text, r.IsError
	}
	for _, b := range []string{"a", "b"} {
		text, isErr := call("branch_new", map[string]any{"name": b, "actor": "agent-" + b})
		if want := "Created branch " + b + " at " + mnt + "@" + b + "."; isErr || !strings.HasPrefix(text, want) {
			t.Fatalf("branch_new %s: %q, want %q first", b, text, want)
		}
	}
	if text, isErr := call("branch_new", map[string]any{"name": "a"}); !isErr || !strings.Contains(text, `"a" exists`) {
		t.Fatalf("branch_new of a taken name: %q (error %v)", text, isErr)
	}
	must(t, os.WriteFile(filepath.Join(mnt+"@a", "notes.txt"), []byte("one-a\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(mnt+"@a", "new.txt"), []byte("new\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(mnt+"@b", "notes.txt"), []byte("one-b\n"), 0o644))

	text, _ := call("branch_list", map[string]any{})
	wantList := "2 branches:\na: " + mnt + "@a (agent agent-a), 2 changed files, no conflicts\nb: " + mnt + "@b (agent agent-b), 1 changed file, no conflicts"
	if text != wantList {
		t.Fatalf("branch_list:\n%s\nwant\n%s", text, wantList)
	}
	sum := func(s string) string { return versionstore.SumString(s).Short() }
	text, _ = call("branch_diff", map[string]any{"name": "a"})
	wantDiff := "Merging branch a: 2 to write, 0 to remove, 0 already the same, no conflicts.\n" +
		"write new.txt (base -, workspace -, branch " + sum("new\n") + ")\n" +
		"write notes.txt (base " + sum("one\n") + ", workspace " + sum("one\n") + ", branch " + sum("one-a\n") + ")"
	if text != wantDiff {
		t.Fatalf("branch_diff a:\n%s\nwant\n%s", text, wantDiff)
	}
	wantFile(t, filepath.Join(mnt, "notes.txt"), "one\n")

	if text, isErr := call("branch_merge", map[string]any{"name": "a"}); isErr ||
		!strings.HasPrefix(text, "Merged branch a: 2 files applied. Undo it with `dshfs rewind merge:a`.") {
		t.Fatalf("branch_merge a: %q (error %v)", text, isErr)
	}
	wantFile(t, filepath.Join(mnt, "notes.txt"), "one-a\n")
	wantFile(t, filepath.Join(mnt, "new.txt"), "new\n")

	text, isErr := call("branch_merge", map[string]any{"name": "b"})
	if !isErr || !strings.HasPrefix(text, "Error: branch b has 1 conflict; nothing applied, the branch kept.") ||
		!strings.HasSuffix(text, "\nconflict modify/modify: notes.txt (base "+sum("one\n")+", workspace "+sum("one-a\n")+", branch "+sum("one-b\n")+")") {
		t.Fatalf("branch_merge b: %q (error %v)", text, isErr)
	}
	wantFile(t, filepath.Join(mnt, "notes.txt"), "one-a\n")
	wantFile(t, filepath.Join(mnt+"@b", "notes.txt"), "one-b\n")
	if text, isErr := call("branch_diff", map[string]any{"name": "z"}); !isErr || text != `Error: branch "z": no such branch` {
		t.Fatalf("branch_diff of no branch: %q (error %v)", text, isErr)
	}
}

// checkBranchToolList checks that the session lists the daemon's tools
// and the branch tools, with their hints.
func checkBranchToolList(ctx context.Context, t *testing.T, session *mcp.ClientSession, socket string) {
	t.Helper()
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := unixsocket.NewClient(socket).Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := append(defs, toolapi.BranchDefinitions()...)
	if len(tools.Tools) != len(want) {
		t.Fatalf("%d MCP tools, want %d", len(tools.Tools), len(want))
	}
	byName := map[string]*mcp.Tool{}
	for _, mt := range tools.Tools {
		byName[mt.Name] = mt
	}
	for _, d := range want {
		mt := byName[d.Name]
		if mt == nil {
			t.Fatalf("MCP does not list %q", d.Name)
		}
		a := mt.Annotations
		if mt.Description != d.Description || mt.Title != d.Title || a == nil ||
			a.ReadOnlyHint != d.Annotations.ReadOnly || a.DestructiveHint == nil || *a.DestructiveHint != d.Annotations.Destructive {
			t.Fatalf("MCP tool %s: %q %+v, want %q %+v", d.Name, mt.Description, a, d.Description, d.Annotations)
		}
	}
}

func wantFile(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Fatalf("%s: %q, %v; want %q", path, b, err, want)
	}
}
