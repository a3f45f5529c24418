// Each test's comment says what used to go wrong before it.

package unixsocket

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
)

// A streamed rewind outlives the server's write timeout (CallTimeout + 1
// minute): it used to be cut at the first progress line written after it,
// its context cancelled, the workspace left half rewound and the client told
// "the answer ended early".
func TestLongRewindOutlivesWriteTimeout(t *testing.T) {
	ws := t.TempDir()
	socket := filepath.Join(t.TempDir(), "run", "dshfs.sock")
	store, err := versionstore.Open(ws, filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := policy.New(store.Observations(), policy.Options{})
	svc, _ := toolapi.New(store, pol, toolapi.Config{})
	srv := NewServer(Config{Tools: svc, Store: store})
	srv.writeTimeout = 200 * time.Millisecond
	l, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() { l.Close(); <-done; store.Close() })

	write := func(rel, content string) {
		tg, err := store.Resolve(rel, rel, "write")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.WriteText(context.Background(), tg, content, versionstore.Intent{}, versionstore.ToolWriter("a")); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "a1\n")
	write("b.txt", "b1\n")
	if _, err := store.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	write("a.txt", "a2\n")
	write("b.txt", "b2\n")

	// A long rewind: here the first file is busy for a while (its lock held).
	unlock := store.AttachMount(nil).Locks().Lock("a.txt")
	time.AfterFunc(5*srv.writeTimeout, unlock)

	client := NewClient(socket)
	defer client.CloseIdle()
	_, rerr := client.Rewind(context.Background(), RewindRequest{Checkpoint: "cp"}, nil)
	b, _ := os.ReadFile(filepath.Join(ws, "b.txt"))
	if rerr != nil || string(b) != "b1\n" {
		t.Fatalf("rewind: %v; b.txt = %q, want \"b1\\n\"", rerr, b)
	}
}

// A session's diff with max_bytes is written as it is computed and cut at
// a line's end, with a last line saying so; a bad request is still an
// error, not an empty diff (the answer's status is decided by the first
// byte of the diff).
func TestSessionDiffMaxBytes(t *testing.T) {
	ws := t.TempDir()
	socket := filepath.Join(t.TempDir(), "run", "dshfs.sock")
	store, err := versionstore.Open(ws, filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := toolapi.New(store, nil, toolapi.Config{})
	srv := NewServer(Config{Tools: svc, Store: store})
	l, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() { l.Close(); <-done; store.Close() })
	write := func(rel, content string) {
		tg, err := store.Resolve(rel, rel, "write")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.WriteText(context.Background(), tg, content, versionstore.Intent{}, versionstore.ToolWriter("a")); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		write(f, "one\n")
	}
	if _, err := store.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		write(f, "two\n")
	}
	client := NewClient(socket)
	defer client.CloseIdle()
	all, err := client.raw(t.Context(), "/v1/diff?since=cp")
	if err != nil || strings.Count(string(all), "diff --git") != 3 {
		t.Fatalf("the whole diff: %v\n%s", err, all)
	}
	cut, err := client.raw(t.Context(), "/v1/diff?since=cp&max_bytes=90")
	first := string(all)[:strings.Index(string(all), "diff --git a/b.txt")]
	if want := first + "... rest of the diff not shown (max_bytes 90; 2 of 3 changed files not shown in full)\n"; err != nil || string(cut) != want {
		t.Fatalf("cut at 90 bytes: %v\n%s\nwant:\n%s", err, cut, want)
	}
	if _, err := client.raw(t.Context(), "/v1/diff?since=nowhere&max_bytes=100"); err == nil || !strings.Contains(err.Error(), "not a checkpoint") {
		t.Fatalf("a bad since: %v, want its error", err)
	}
}
