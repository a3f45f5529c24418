package fusefs

import (
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// A waiter on a file being written is told when it stops being written at
// its path: its last writer's release, a rename or an unlink takes it from
// there; a second handle's release does not.
func TestWritersTellWhenAFileIsLetGo(t *testing.T) {
	ws := newWriters(new(versionstore.Locks))
	a, b := &node{}, &node{}
	sh := versionstore.Writer{Kind: versionstore.WriterMount, Pid: 7, Comm: "sh"}
	if ws.Released("k") != nil || ws.Idle() != nil {
		t.Fatal("a channel to wait on while nothing is being written")
	}
	ws.begin(a, "k", false, sh)
	ws.begin(a, "k", false, sh)
	ws.begin(b, "u", false, sh)
	atK, idle := ws.Released("k"), ws.Idle()
	ws.end(a)
	if closed(atK) || closed(idle) {
		t.Fatal("told k was let go while a second handle still writes it")
	}
	ws.moved("k", "m", false)
	if !closed(atK) {
		t.Fatal("not told when a rename took the file from k")
	}
	atM := ws.Released("m")
	ws.end(a)
	if !closed(atM) || closed(idle) {
		t.Fatalf("after the last release of m: m told %v, idle told %v (u is still written)", closed(atM), closed(idle))
	}
	atU := ws.Released("u")
	ws.unlinked("u")
	if !closed(atU) || ws.Released("u") != nil {
		t.Fatal("not told when an unlink took the file from u")
	}
	ws.end(b)
	if !closed(idle) || ws.Idle() != nil {
		t.Fatal("not told when the last file was let go")
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
