package versionstore

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// waitRecordGone waits, a bounded while, for key's unsettled record to
// leave the index; it reports whether it did.
func (ts *testStore) waitRecordGone(key string) bool {
	ts.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, ok := ts.unsettledRecord(key); !ok {
			return true
		}
	}
	return false
}

// Once a tool's publish is on disk its record goes, without waiting for
// some other commit: a change made straight into the backing directory
// after that (a checkout putting the old bytes back) is no lost publish,
// and a power cut later must not undo it.
func TestSettledRecordGoesWithoutAnotherCommit(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "before\n")
	v := ts.version("f")
	_, err := ts.WriteText(context.Background(), ts.target("f"), "the tool's\n", Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
	must(t, err)
	ts.waitSynced()
	gone := ts.waitRecordGone("f")
	ts.stopSettling()
	ts.put("f", "before\n") // `git checkout f` in the backing directory, then the cut
	ts.restartAfterCut()
	if got := ts.get("f"); got != "before\n" {
		t.Fatalf("f holds %q after the restart (record gone after the settling: %v): the checkout made after the publish had settled was undone", got, gone)
	}
}

// A publish whose directory is removed straight in the backing directory
// before it settles is settled by that removal: a clean close leaves no
// record, and the next open does not make the directory and file again.
func TestPublishWhoseDirectoryWentLeavesNoRecord(t *testing.T) {
	ts := openTestStore(t)
	ts.stopSettling()
	_, err := ts.WriteText(context.Background(), Target{Key: "d/f", Display: "/ws/d/f"}, "new\n", Intent{Kind: IntentCreateIfAbsent}, ToolWriter("t"))
	must(t, err)
	must(t, os.RemoveAll(ts.path("d")))
	must(t, ts.Close())
	db, err := bolt.Open(ts.index, 0o600, &bolt.Options{ReadOnly: true})
	must(t, err)
	var left int
	must(t, db.View(func(tx *bolt.Tx) error { left = tx.Bucket(bucketUnsettled).Stats().KeyN; return nil }))
	must(t, db.Close())
	ts.open()
	if _, err := os.Lstat(ts.path("d")); err == nil {
		t.Fatalf("d is back after a clean close and open (%d unsettled records left by the close): the directory removed since the publish was made again", left)
	}
	if left != 0 {
		t.Fatalf("%d unsettled records after a clean close", left)
	}
}

// A publish is settled only by a sync that came after it: the settler,
// slow in a sync begun for an earlier publish of the same bytes, must not
// take a later publish of them (the file edited back) for synced, nor drop
// its record.
func TestLaterPublishOfTheSameBytesIsSyncedItself(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "zero\n")
	v := ts.version("f")
	var ops []string
	var mu sync.Mutex
	var armed atomic.Bool
	armed.Store(true)
	reached, release := make(chan struct{}), make(chan struct{})
	traceSync = func(op, name string) {
		mu.Lock()
		ops = append(ops, op+" "+name)
		mu.Unlock()
		if op == "sync" && armed.CompareAndSwap(true, false) {
			close(reached) // the settler, in its sync of the first publish
			<-release
		}
	}
	t.Cleanup(func() { traceSync = nil })
	write := func(content string, prev Version) Version {
		res, err := ts.WriteText(context.Background(), ts.target("f"), content, Intent{Kind: IntentReplaceIfVersion, Version: prev}, ToolWriter("t"))
		must(t, err)
		return res.Version
	}
	x := write("x\n", v)
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the settler did not sync the first publish")
	}
	y := write("y\n", x)
	if write("x\n", y) != x {
		t.Fatal("the same bytes got another version")
	}
	mu.Lock()
	renamed := len(ops) // the last publish's rename is the last op so far
	mu.Unlock()
	close(release)
	for deadline := time.Now().Add(10 * time.Second); ts.settle.count.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	after := slices.Clone(ops[renamed:])
	last := ops[renamed-1]
	mu.Unlock()
	_, recorded := ts.unsettledRecord("f")
	if last != "rename f" || !recorded && !slices.Contains(after, "sync .") {
		t.Fatalf("after the last publish (%q) came %q, and its record is gone: it was taken for settled by the sync of the first", last, after)
	}
}

// A tool's publish in a directory the mount renames before the publish
// settles (the rename's settling came first, the publish right after it)
// moves with the directory: it is synced, or put back after a power cut,
// at its new path, even if the settler looked for it in between.
func TestPublishMovedWithItsDirectoryIsSettledThere(t *testing.T) {
	ts := openTestStore(t)
	ts.put("d/f", "before\n")
	v := ts.version("d/f")
	unlock := ts.locks.Lock2("d", "e")
	ts.mount.Preserve("d") // the mount's rename of d begins: nothing of d's to settle yet
	ts.mount.Preserve("e")
	ts.stopSettling()
	_, err := ts.WriteText(context.Background(), ts.target("d/f"), "after\n", Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
	must(t, err)
	must(t, os.Rename(ts.path("d"), ts.path("e")))
	// The settler's pass in that moment finds no d: the publish is not
	// gone, it is moving.
	must(t, ts.settleWhere(everything, true))
	must(t, ts.mount.MoveTree("d", "e", External))
	unlock()
	ts.put("e/f", "before\n") // the publish's rename, lost with the cut
	ts.restartAfterCut()
	if got := ts.get("e/f"); got != "after\n" {
		t.Fatalf("e/f holds %q after the restart: the tool's acknowledged write, moved with its directory, was lost", got)
	}
}

// A publish whose bytes reached the disk only in part, as writeback left
// them at the cut (the first pages and the size so far; or some pages, with
// zeros where the others should be), is a lost publish too, put back.
func TestTornPublishIsPutBack(t *testing.T) {
	after := strings.Repeat("the tool's line\n", 1024) // 16 KiB: four pages
	cases := []struct {
		name string
		torn string
	}{
		{"first page", after[:4096]},
		{"pages and zeros", after[:4096] + strings.Repeat("\x00", 8192) + after[12288:]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := openTestStore(t)
			ts.put("f", "before\n")
			v := ts.version("f")
			ts.stopSettling()
			_, err := ts.WriteText(context.Background(), ts.target("f"), after, Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
			must(t, err)
			ts.put("f", c.torn)
			ts.restartAfterCut()
			if got := ts.get("f"); got != after {
				t.Fatalf("f holds %d bytes (%q…) after the restart, want the tool's acknowledged %d", len(got), got[:min(len(got), 20)], len(after))
			}
		})
	}
}

// A restore over a tool's publish not yet settled settles it, record and
// all, before it changes the file: a cut after the restore's rename and
// before its commit must not find the record there and take the restored
// bytes (those before the publish) for the publish lost.
func TestRestoreSettlesThePublishFirst(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "before\n")
	v := ts.version("f")
	ts.stopSettling()
	_, err := ts.WriteText(context.Background(), ts.target("f"), "the tool's\n", Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
	must(t, err)
	var left bool
	ts.beforePublish = func() { _, left = ts.unsettledRecord("f") }
	_, err = ts.Restore(context.Background(), ts.target("f"), v, ToolWriter("me"))
	ts.beforePublish = nil
	must(t, err)
	ts.restartAfterCut()
	if left {
		t.Fatal("the tool's unsettled record was still there when the restore replaced f: a cut before the restore's commit would put the tool's write back over it")
	}
}

// A tool's publish too large to ride its commit, over a small one not yet
// settled, settles that one and deletes its record first: the large one is
// synced before its commit, and a cut in between must not find the small
// one's record and take the large one's bytes (the file's bytes before the
// small one, written back) for the small one lost.
func TestLargePublishSettlesTheSmallOneFirst(t *testing.T) {
	ts := openTestStore(t)
	large := strings.Repeat("a line of the large file\n", 12<<10) // 300 KiB
	ts.put("f", large)
	v := ts.version("f")
	ts.stopSettling()
	small, err := ts.WriteText(context.Background(), ts.target("f"), "small\n", Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
	must(t, err)
	var left bool
	ts.beforePublish = func() { _, left = ts.unsettledRecord("f") }
	_, err = ts.WriteText(context.Background(), ts.target("f"), large, Intent{Kind: IntentReplaceIfVersion, Version: small.Version}, ToolWriter("t"))
	ts.beforePublish = nil
	must(t, err)
	ts.restartAfterCut()
	if left {
		t.Fatal("the small publish's record was still there when the large one replaced f: a cut before the large one's commit would put the small one back over it")
	}
}
