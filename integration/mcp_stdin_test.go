package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"golang.org/x/sys/unix"
)

// mountMCP mounts a workspace for `dshfs mcp` tests; it returns the mount
// point, the state directory and the daemon's socket.
func mountMCP(t *testing.T) (mnt, state, socket string) {
	t.Helper()
	testfuse.Require(t)
	backing, state := t.TempDir(), t.TempDir()
	mnt = filepath.Join(t.TempDir(), "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	if out, code := dshfs(t, state, "mount", backing, mnt); code != 0 {
		t.Fatalf("mount: %s", out)
	}
	t.Cleanup(func() {
		dshfs(t, state, "unmount", mnt)
		unix.Unmount(mnt, mntDetach)
	})
	sockets, _ := filepath.Glob(filepath.Join(state, "dshfs", "*", "dshfs.sock"))
	if len(sockets) != 1 {
		t.Fatalf("sockets %q, want one", sockets)
	}
	return mnt, state, sockets[0]
}

// mcpBatch runs `dshfs mcp args...` with the requests as its whole standard
// input, closed once they are written, and returns the responses by id.
func mcpBatch(t *testing.T, state string, requests []string, args ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(dshfsBin, append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	cmd.Stdin = strings.NewReader(strings.Join(requests, "\n") + "\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("dshfs mcp: %v: %s", err, errOut.String())
	}
	byID := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		if line != "" && json.Unmarshal([]byte(line), &msg) == nil && msg.ID != nil {
			byID[string(msg.ID)] = line
		}
	}
	return byID
}

// initialize is an MCP client's handshake as client, and the notification
// that ends it.
func initialize(client string) []string {
	return []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":` +
			jsonString(client) + `,"version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// `dshfs mcp < requests.jsonl` answers every request it read before it
// exits, as a stdio server does, whether it hands the session to the daemon
// or relays each call itself.
func TestMCPAnswersRequestsOnClosedInput(t *testing.T) {
	mnt, state, socket := mountMCP(t)
	must(t, os.WriteFile(filepath.Join(mnt, "a.txt"), []byte("alpha\n"), 0o644))
	for _, mode := range []struct{ name, socket string }{{"handed over", socket}, {"relayed", noSessions(t, socket)}} {
		t.Run(mode.name, func(t *testing.T) {
			requests := append(initialize("batch"),
				`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
				`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read","arguments":{"file_path":`+
					jsonString(filepath.Join(mnt, "a.txt"))+`}}}`)
			got := mcpBatch(t, state, requests, "--socket", mode.socket)
			if len(got) != 3 {
				t.Fatalf("answered %d of 3 requests: %v", len(got), got)
			}
			if !strings.Contains(got["3"], `1: alpha`) {
				t.Fatalf("read answered %s", got["3"])
			}
		})
	}
}

// An MCP session's actor is named after the client (initialize's
// clientInfo.name), made safe to show and store, and numbered to stay
// unique per session: what a person reads in `dshfs log` says which
// harness wrote.
func TestMCPActorNamedAfterTheClient(t *testing.T) {
	mnt, state, socket := mountMCP(t)
	client := unixsocket.NewClient(socket)
	for _, c := range []struct{ client, file, actor, socket string }{
		{"claude-code", "a.txt", "claude-code-1", socket},
		{"claude-code", "b.txt", "claude-code-2", socket},
		{"codex", "c.txt", "codex-1", socket},
		// Relayed (a daemon that does not take sessions, so names none):
		// named after the client, unique by chance.
		{"codex", "f.txt", "codex-[0-9a-f]{12}", noSessions(t, socket)},
		{"../evil\n/name " + strings.Repeat("x", 100), "d.txt", "evil-name-" + strings.Repeat("x", 22) + "-1", socket},
		{"", "e.txt", "mcp-1", socket},
	} {
		path := filepath.Join(mnt, c.file)
		got := mcpBatch(t, state, append(initialize(c.client),
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write","arguments":{"file_path":`+
				jsonString(path)+`,"content":"x\n"}}}`), "--socket", c.socket)
		if !strings.Contains(got["2"], "Created file") {
			t.Fatalf("%q: write answered %q", c.client, got["2"])
		}
		h, err := client.History(context.Background(), "", path)
		if err != nil || len(h) == 0 || !regexp.MustCompile(`^`+c.actor+`$`).MatchString(h[0].Writer.Actor) {
			t.Errorf("client %q: %s written by %+v (%v), want actor %q", c.client, c.file, h, err, c.actor)
		}
	}
	// The harness (this test) runs its shell commands for the actor of its
	// latest session.
	path := filepath.Join(mnt, "g.txt")
	if out, err := exec.Command("sh", "-c", `echo by the shell > "$0"`, path).CombinedOutput(); err != nil {
		t.Fatalf("sh: %v %s", err, out)
	}
	h, err := client.History(context.Background(), "", path)
	for deadline := time.Now().Add(10 * time.Second); err == nil && len(h) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the kernel releases the closed file after the shell exits
		h, err = client.History(context.Background(), "", path)
	}
	if err != nil || len(h) == 0 || h[0].Writer.Actor != "mcp-1" || h[0].Writer.Comm != "sh" {
		t.Errorf("the shell's g.txt written by %+v (%v), want sh for mcp-1", h, err)
	}
}
