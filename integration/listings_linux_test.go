package integration

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// Directory listings cached by the kernel follow changes through the mount,
// by the tools, and straight into the backing directory.
func TestDirectoryListingsFollowChanges(t *testing.T) {
	w := mountWorkspace(t)
	w.sh("mkdir d && touch d/a")
	list := func() string { return strings.TrimSpace(w.sh("ls d | tr '\\n' ' '")) }
	if got := list(); got != "a" {
		t.Fatalf("ls = %q", got)
	}
	w.sh("touch d/b")
	if got := list(); got != "a b" {
		t.Fatalf("after a create through the mount: %q", got)
	}
	if r := w.write("agent", "d/c", "x"); r.IsError {
		t.Fatal(r.Text)
	}
	if got := list(); got != "a b c" {
		t.Fatalf("after a tool create: %q", got)
	}
	testfuse.ClockPast(t, w.backing+"/d") // a listing is dropped when d's mtime moves
	if err := os.WriteFile(w.backing+"/d/e", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testfuse.WaitFor(3*time.Second, func() bool { return list() == "a b c e" }) // the attribute timeout, 1 s
	if got := list(); got != "a b c e" {
		t.Fatalf("after an outside create: %q", got)
	}
}
