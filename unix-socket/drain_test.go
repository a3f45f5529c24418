package unixsocket

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// Shutdown lets a call under way answer, closes the connections waiting
// for a request, and refuses new ones; it returns once the call is over.
func TestShutdownLetsCallsUnderWayAnswer(t *testing.T) {
	d := startDaemon(t, 0)
	idle, err := dial(context.Background(), d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()

	unlock := d.store.AttachMount(nil).Locks().Lock("f.txt") // the write below waits for it: a call under way
	answered := make(chan error, 1)
	go func() {
		args, _ := json.Marshal(map[string]string{"file_path": d.ws + "/f.txt", "content": "drained\n"})
		res, err := d.client.Call(context.Background(), "write", ToolRequest{Actor: "me", Arguments: args})
		if err == nil && res.IsError {
			t.Errorf("write answered with an error: %s", res.Text)
		}
		answered <- err
	}()
	if !testfuse.WaitFor(30*time.Second, func() bool { return d.srv.calls.busy() && d.srv.open.Load() == 2 }) {
		t.Fatal("the write never got under way")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- d.srv.Shutdown(context.Background()) }()
	// The idle connection is closed; new ones are refused.
	idle.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Errorf("an idle connection read %d bytes, %v, as the server stopped; want it closed", n, err)
	}
	if c, err := dial(context.Background(), d.socket); err == nil {
		c.Close()
		t.Error("a new connection was accepted while the server stopped")
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) with a call under way", err)
	default:
	}
	unlock()
	if err := <-answered; err != nil {
		t.Fatalf("the write under way got no answer: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// A connection that never sent a request holds no call: Shutdown closes it
// at once rather than waiting the 5 s net/http gives such a connection.
func TestShutdownDoesNotWaitForASilentConnection(t *testing.T) {
	d := startDaemon(t, 0)
	silent, err := dial(context.Background(), d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if !testfuse.WaitFor(30*time.Second, func() bool { return d.srv.open.Load() == 1 }) {
		t.Fatal("the connection was never accepted")
	}
	start := time.Now()
	if err := d.srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// net/http closes a silent connection only once it is 5 s old.
	if took := time.Since(start); took >= 3*time.Second {
		t.Errorf("Shutdown took %v: it waited for a connection that never sent a request", took.Round(time.Millisecond))
	}
	silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Errorf("the silent connection read %d bytes, %v, after Shutdown; want it closed", n, err)
	}
}
