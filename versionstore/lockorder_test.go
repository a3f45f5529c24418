package versionstore

import (
	"strings"
	"testing"
)

// The order's check sees a lock taken out of order: a file's lock under
// the batch commit, two files' locks against key order, the moves lock
// under a file's. Two files' locks in key order (a rename's) are in order.
func TestLockOrderCheckSeesInversions(t *testing.T) {
	var l Locks
	stop := CheckLockOrder()
	unlock := l.Lock2("b", "a")
	unlock()
	if inv := stop(); len(inv) != 0 {
		t.Fatalf("a rename's two locks in key order taken for an inversion: %q", inv)
	}

	stop = CheckLockOrder()
	batch := Ranked(RankBatch, "")
	unlock = l.Lock("a") // a file's lock under the batch commit
	unlock()
	batch()
	unlockB := l.Lock("b")
	unlockA := l.Lock("a") // against key order
	moves := Ranked(RankMoves, "")
	moves()
	unlockA()
	unlockB()
	inv := stop()
	want := []string{
		`took a file's lock ("a") while holding the mount's batch commit`,
		`took a file's lock ("a") while holding a file's lock ("b")`,
		`took the mount's moves lock while holding a file's lock ("b")`,
		`took the mount's moves lock while holding a file's lock ("a")`,
	}
	if strings.Join(inv, "\n") != strings.Join(want, "\n") {
		t.Fatalf("inversions:\n%s\nwant:\n%s", strings.Join(inv, "\n"), strings.Join(want, "\n"))
	}
}
