package fusefs

import (
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// The writers follow their files through renames, unlinks and replacement;
// the last handle's end says what is owed, and where.
func TestWritersFollowTheirFiles(t *testing.T) {
	ws := newWriters(new(versionstore.Locks))
	a, b, c := &node{}, &node{}, &node{}
	ws.begin(a, "d/a", false)
	ws.begin(a, "d/a", false) // a second handle
	ws.begin(b, "x", true)
	ws.begin(c, "e/c", false)
	if !ws.Writing("d/a") || !ws.Writing("x") || ws.Count() != 3 {
		t.Fatalf("after begin: d/a %v, x %v, count %d", ws.Writing("d/a"), ws.Writing("x"), ws.Count())
	}
	ws.moved("d", "e", false) // d renamed over e: d/a is e/a now, e/c is replaced
	if ws.Writing("d/a") || !ws.Writing("e/a") {
		t.Fatal("d/a did not move to e/a")
	}
	if k, _ := ws.keyOf(c); k != "" || ws.Writing("e/c") {
		t.Fatalf("e/c, replaced by the rename, still has the path %q", k)
	}
	ws.moved("x", "y", true) // an exchange: y's file (none) and x's swap
	if !ws.Writing("y") || ws.Writing("x") {
		t.Fatal("the exchange did not move x to y")
	}
	ws.unlinked("y")
	if ws.Writing("y") {
		t.Fatal("an unlinked file is still being written at its path")
	}
	if key, owed, last := ws.end(a); last || owed || key != "e/a" {
		t.Fatalf("first end of a: %q %v %v", key, owed, last)
	}
	ws.owe(a)
	if key, owed := ws.paid(a, false); !owed || key != "e/a" {
		t.Fatalf("paid: %q %v", key, owed)
	}
	if key, owed, last := ws.end(a); !last || owed || key != "e/a" {
		t.Fatalf("last end of a: %q %v %v (the flush paid it)", key, owed, last)
	}
	if key, owed, last := ws.end(b); !last || !owed || key != "" {
		t.Fatalf("end of b: %q %v %v: owed, but its file left the tree", key, owed, last)
	}
	ws.end(c)
	if ws.Count() != 0 || len(ws.paths) != 0 {
		t.Fatalf("%d files, %d paths left", ws.Count(), len(ws.paths))
	}
}
