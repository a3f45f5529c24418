package mcptools

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lockedBuffer is a session's output, written by its handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Close() error { return nil }

// Requests written all at once, the input closed behind them, are each
// answered before the session ends, a slow call's too; and the actor is
// named once, after the client.
func TestTransportAnswersEveryRequestRead(t *testing.T) {
	var actors []string
	var mu sync.Mutex
	actor := NamedActor(func(client string) string { return toolapi.ActorBase(client) + "-1" })
	call := func(ctx context.Context, tool string, args json.RawMessage) (Outcome, error) {
		time.Sleep(50 * time.Millisecond) // answered after the input ended
		mu.Lock()
		actors = append(actors, actor.Name("late"))
		mu.Unlock()
		return Outcome{Text: "ok"}, nil
	}
	server := NewServer(toolapi.Definitions(toolapi.DefaultReadLimit), call, Options{
		OnInitialized: func(p *mcp.InitializeParams) { actor.Name(ClientName(p)) }})
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-code","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"a"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read","arguments":{"file_path":"b"}}}`,
	}, "\n") + "\n"
	out := &lockedBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ss, err := server.Connect(ctx, Transport(io.NopCloser(strings.NewReader(in)), out), nil)
	if err != nil {
		t.Fatal(err)
	}
	ss.Wait()
	out.mu.Lock()
	lines := strings.Split(strings.TrimSpace(out.b.String()), "\n")
	out.mu.Unlock()
	if len(lines) != 3 || !strings.Contains(lines[2], `"text":"ok"`) {
		t.Fatalf("answered %d of 3 requests:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if len(actors) != 2 || actors[0] != "claude-code-1" || actors[1] != "claude-code-1" {
		t.Fatalf("calls made as %q, want claude-code-1", actors)
	}
}
