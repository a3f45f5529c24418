package versionstore

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// exchangeLoop swaps a and b (RENAME_EXCHANGE) over and over until stop is
// closed, at most max times and for at most limit, and reports how many
// swaps it made once stop is closed.
func exchangeLoop(a, b string, max int, limit time.Duration) (stop func() int) {
	done := make(chan struct{})
	var n int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		deadline := time.Now().Add(limit)
		for ; n < max && time.Now().Before(deadline); n++ {
			select {
			case <-done:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				return
			}
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		return n
	}
}

// While a rewind of 200 files under att/sub runs, the attacker swaps the
// real directory att/sub with att/link, a symlink to ../victim, as fast as
// RENAME_EXCHANGE goes. Each file the rewind restores, recreates or removes
// may then meet either. The store used to check the parent by path and then
// act by path, so some operations went through the link: it removed and
// overwrote the victim's files, planted new ones (root's, with the
// attacker's bytes and mode) and left temp files behind. Every operation on
// a key now goes through the descriptor of a real directory, opened without
// following a link: nothing in victim/ is created, changed or removed.
func TestRewindUnderExchangeRace(t *testing.T) {
	ts := openTestStore(t)
	const n = 200
	name := func(i int) string { return fmt.Sprintf("f%03d", i) }
	for i := range n {
		ts.put("att/sub/"+name(i), fmt.Sprintf("one %d\n", i))
		must(t, os.Chmod(ts.path("att/sub/"+name(i)), 0o755))
		if i%3 != 1 { // the recreated ones have no namesake in victim/
			ts.put("victim/"+name(i), fmt.Sprintf("victim's %d\n", i))
		}
	}
	must(t, os.Symlink("../victim", ts.path("att/link")))
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		switch i % 3 {
		case 0: // changed: restored
			ts.put("att/sub/"+name(i), fmt.Sprintf("two %d\n", i))
		case 1: // deleted: recreated
			must(t, os.Remove(ts.path("att/sub/"+name(i))))
		case 2: // replaced by a new file under a new name: removed
			must(t, os.Rename(ts.path("att/sub/"+name(i)), ts.path(fmt.Sprintf("att/sub/new%03d", i))))
		}
	}
	if _, err := ts.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	before := treeState(t, ts.path("victim"))

	stop := exchangeLoop(ts.path("att/sub"), ts.path("att/link"), 1_000_000, 20*time.Second)
	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	swaps := stop()
	must(t, err)
	t.Logf("%d swaps during the rewind: %d actions, %d conflicts", swaps, len(res.Actions), res.Conflicts)
	wantSameTree(t, "rewind under the race", before, treeState(t, ts.path("victim")))
	noTemps(t, ts.dir)
}

// A kernel without openat2 (before 5.6), as darwin: every key's directory
// is opened one element at a time with O_NOFOLLOW|O_DIRECTORY, and the
// same attacks fail the same way.
func TestKeyDirWithoutOpenat2(t *testing.T) {
	noOpenat2.Store(true)
	t.Cleanup(func() { noOpenat2.Store(false) })
	t.Run("walk", TestWalkDir)
	t.Run("sync", TestSyncDoesNotReadThroughSymlinkedParent)
	t.Run("rewind", TestRewindDoesNotActThroughSymlinkedParent)
	t.Run("race", TestRewindUnderExchangeRace)
}
