package versionstore

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// unsettledRecord reads key's record in the unsettled bucket.
func (ts *testStore) unsettledRecord(key string) (unsettled, bool) {
	ts.t.Helper()
	var u unsettled
	var ok bool
	must(ts.t, ts.db.View(func(tx *bolt.Tx) error {
		u, ok = getUnsettled(tx.Bucket(bucketUnsettled), key)
		return nil
	}))
	return u, ok
}

// waitSynced waits until every unsettled publish is synced.
func (ts *testStore) waitSynced() {
	ts.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ts.settle.mu.Lock()
		n := 0
		for _, p := range ts.settle.pending {
			if !p.synced {
				n++
			}
		}
		ts.settle.mu.Unlock()
		if n == 0 {
			return
		}
	}
	ts.t.Fatal("publishes not synced after 10 s")
}

// stopSettling stops the store's background loop, so publishes stay
// unsettled: what a crash right after the acknowledgement leaves.
func (ts *testStore) stopSettling() {
	close(ts.stopSync)
	ts.syncDone.Wait()
	ts.stopSync = make(chan struct{}) // for Close, which settles what is left
}

// restartAfterCut drops the store, its loop already stopped, without
// closing it (no settling, no clean mark) and opens it again, as a restart
// after a power cut does.
func (ts *testStore) restartAfterCut() {
	ts.t.Helper()
	must(ts.t, ts.db.Close())
	must(ts.t, ts.root.Close())
	must(ts.t, ts.rootDir.Close())
	ts.closeMu.Do(func() {})
	ts.open()
}

// A small tool publish is acknowledged when its commit, which holds its
// bytes and its unsettled record, is durable; the file and its directory
// are synced after, and the record goes in the settler's commit.
func TestToolPublishSettlesAfterItsCommit(t *testing.T) {
	ts := openTestStore(t)
	ops := recordSyncs(t)
	tg := Target{Key: "a/b/f", Display: "/ws/a/b/f"}
	var u unsettled
	var ok bool
	committed := func(tx *bolt.Tx, _ Version) error {
		traceSync("commit", tg.Key)
		u, ok = getUnsettled(tx.Bucket(bucketUnsettled), tg.Key) // the settler may drop it as soon as it is durable
		return nil
	}
	res, err := ts.WriteText(context.Background(), tg, "one\n", Intent{Kind: IntentCreateIfAbsent}, ToolWriter("t"), committed)
	must(t, err)
	if !ok || u.Version != res.Version || len(u.Before) != 0 || !u.NoFile || u.Size != 4 {
		t.Fatalf("unsettled record in the write's commit: %+v %v, want version %s over no file, size 4", u, ok, res.Version)
	}
	ts.waitSynced()
	// New directories are still synced into their parents; the record
	// commits before the link, so a cut after the link always finds it.
	if got, want := ops.get(), []string{"sync .", "sync a", "commit a/b/f", "link a/b/f", "sync a/b"}; !slices.Equal(got, want) {
		t.Fatalf("create: %q, want %q", got, want)
	}
	if !ts.waitRecordGone("a/b/f") {
		t.Fatal("record still there after the publish was synced")
	}
	for deadline := time.Now().Add(5 * time.Second); ts.settle.count.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d publishes still tracked", ts.settle.count.Load())
		}
	}
	// A replace likewise commits before its rename.
	ops.reset()
	_, err = ts.WriteText(context.Background(), tg, "two\n", Intent{Kind: IntentReplaceIfVersion, Version: res.Version}, ToolWriter("t"), committed)
	must(t, err)
	ts.waitSynced()
	if got, want := ops.get(), []string{"commit a/b/f", "rename a/b/f", "sync a/b"}; !slices.Equal(got, want) {
		t.Fatalf("replace: %q, want %q", got, want)
	}
}

// After a power cut, a tool's acknowledged publish whose file did not reach
// the disk is put back from its kept bytes before anything is served; a
// file changed after it is left as it is.
func TestLostPublishIsPutBack(t *testing.T) {
	const before, after = "before\n", "after the tool's edit\n"
	cases := []struct {
		name    string
		create  bool
		outcome func(ts *testStore) // what the disk shows after the cut
		want    string
		putBack bool
	}{
		{"rename lost", false, func(ts *testStore) { ts.put("f", before) }, after, true},
		{"data lost", false, func(ts *testStore) { must(ts.t, os.Truncate(ts.path("f"), 0)) }, after, true},
		{"zero-filled", false, func(ts *testStore) { ts.put("f", strings.Repeat("\x00", len(after))) }, after, true},
		{"create lost", true, func(ts *testStore) { must(ts.t, os.Remove(ts.path("f"))) }, after, true},
		{"landed", false, func(*testStore) {}, after, false},
		{"changed since", false, func(ts *testStore) { ts.put("f", "someone else's\n") }, "someone else's\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := openTestStore(t)
			var res WriteResult
			var err error
			if c.create {
				ts.stopSettling()
				res, err = ts.WriteText(context.Background(), ts.target("f"), after, Intent{Kind: IntentCreateIfAbsent}, ToolWriter("t"))
			} else {
				ts.put("f", before)
				v := ts.version("f")
				ts.stopSettling()
				res, err = ts.WriteText(context.Background(), ts.target("f"), after, Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
			}
			must(t, err)
			if _, ok := ts.unsettledRecord("f"); !ok {
				t.Fatal("no unsettled record after the write")
			}
			c.outcome(ts)
			ts.restartAfterCut()
			if got := ts.get("f"); got != c.want {
				t.Fatalf("after the restart f holds %q, want %q", got, c.want)
			}
			if u, ok := ts.unsettledRecord("f"); ok {
				t.Fatalf("record %+v left after the restart", u)
			}
			h, err := ts.History("f")
			must(t, err)
			if h[0].Version != res.Version || h[0].Writer != ToolWriter("t") {
				t.Fatalf("newest history entry %+v, want the tool's %s", h[0], res.Version)
			}
			if v := ts.version("f"); v != SumString(c.want) {
				t.Fatalf("version %s, want that of %q", v, c.want)
			}
			if c.putBack {
				noTemps(t, ts.dir)
			}
		})
	}
}

// A change through the mount waits for a tool's publish of the file to
// settle and its record to be gone, durably: a truncation that follows and
// is cut before its version is recorded is never taken for the publish
// lost.
func TestMountChangeSettlesThePublishFirst(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "before\n")
	v := ts.version("f")
	ts.stopSettling()
	_, err := ts.WriteText(context.Background(), ts.target("f"), "the tool's\n", Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
	must(t, err)
	unlock := ts.locks.Lock("f")
	ts.mount.Preserve("f") // what every write, truncation, unlink or rename through the mount does first
	unlock()
	if u, ok := ts.unsettledRecord("f"); ok {
		t.Fatalf("record %+v still there after Preserve", u)
	}
	must(t, os.Truncate(ts.path("f"), 0)) // the mount's change, then the cut
	ts.restartAfterCut()
	if got := ts.get("f"); got != "" {
		t.Fatalf("f holds %q after the restart: the truncation that followed the tool's write was undone", got)
	}
}

// Back-to-back tool writes of one file do not wait for each other's syncs:
// the second record inherits the first's chain, so a cut that loses both,
// or only the second, puts the second back.
func TestBackToBackPublishesChain(t *testing.T) {
	for _, shows := range []string{"zero\n", "one\n", ""} {
		t.Run(strconv.Quote(shows), func(t *testing.T) {
			ts := openTestStore(t)
			ts.put("f", "zero\n")
			v0 := ts.version("f")
			ts.stopSettling()
			r1, err := ts.WriteText(context.Background(), ts.target("f"), "one\n", Intent{Kind: IntentReplaceIfVersion, Version: v0}, ToolWriter("t"))
			must(t, err)
			r2, err := ts.WriteText(context.Background(), ts.target("f"), "two\n", Intent{Kind: IntentReplaceIfVersion, Version: r1.Version}, ToolWriter("t"))
			must(t, err)
			if u, ok := ts.unsettledRecord("f"); !ok || u.Version != r2.Version || !slices.Equal(u.Before, []Version{r1.Version, v0}) || u.NoFile {
				t.Fatalf("record %+v %v, want version %s over %s, %s", u, ok, r2.Version, r1.Version, v0)
			}
			ts.put("f", shows)
			ts.restartAfterCut()
			if got := ts.get("f"); got != "two\n" {
				t.Fatalf("f holds %q after the restart, want the second write", got)
			}
		})
	}
}

// A chain is bounded, and a publish over a change it did not make (a write
// straight into the backing directory) syncs the earlier one first: the
// new record names only what it replaced.
func TestChainBoundedAndBrokenByOutsideWrites(t *testing.T) {
	ts := openTestStore(t)
	ts.stopSettling()
	tg := Target{Key: "f", Display: "/ws/f"}
	for i := range 3 * maxBefore {
		_, err := ts.WriteText(context.Background(), tg, fmt.Sprintln("write", i), Intent{}, ToolWriter("t"))
		must(t, err)
		if u, _ := ts.unsettledRecord("f"); len(u.Before) > maxBefore {
			t.Fatalf("after %d writes the chain is %d long", i+1, len(u.Before))
		}
	}
	ts.put("f", "outside\n")
	_, err := ts.WriteText(context.Background(), tg, "tool\n", Intent{}, ToolWriter("t"))
	must(t, err)
	if u, ok := ts.unsettledRecord("f"); !ok || !slices.Equal(u.Before, []Version{SumString("outside\n")}) {
		t.Fatalf("record %+v %v, want it over the outside write alone", u, ok)
	}
}

// A clean close settles every publish: no record is left.
func TestCloseSettlesPublishes(t *testing.T) {
	ts := openTestStore(t)
	for _, k := range []string{"a", "b", "d/c"} {
		_, err := ts.WriteText(context.Background(), Target{Key: k, Display: "/ws/" + k}, k+"\n", Intent{}, ToolWriter("t"))
		must(t, err)
	}
	must(t, ts.Close())
	db, err := bolt.Open(ts.index, 0o600, &bolt.Options{ReadOnly: true})
	must(t, err)
	must(t, db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketUnsettled).Stats().KeyN; n != 0 {
			t.Errorf("%d unsettled records after a clean close", n)
		}
		return nil
	}))
	must(t, db.Close())
	ts.open()
}

// A publish whose record committed but whose link then failed (a file
// took the name in between) records what holds the name instead: its
// record must not put the tool's bytes back over that file after a cut.
func TestRecordedPublishThatDidNotTakeItsName(t *testing.T) {
	ts := openTestStore(t)
	ts.stopSettling()
	sneak := func(*bolt.Tx, Version) error { return os.WriteFile(ts.path("f"), []byte("someone's\n"), 0o644) }
	_, err := ts.WriteText(context.Background(), Target{Key: "f", Display: "/ws/f"}, "the tool's\n", Intent{Kind: IntentCreateIfAbsent}, ToolWriter("t"), sneak)
	wantErr(t, err, ReasonExists, "write", "/ws/f")
	if u, ok := ts.unsettledRecord("f"); ok {
		t.Fatalf("record %+v left by a publish that never took the name", u)
	}
	ts.restartAfterCut()
	if got := ts.get("f"); got != "someone's\n" {
		t.Fatalf("f holds %q after the restart, want the file that took the name", got)
	}
	h, err := ts.History("f")
	must(t, err)
	if len(h) == 0 || h[0].Version != SumString("someone's\n") {
		t.Fatalf("newest history entry %+v, want the file that took the name", h)
	}
}

// A read of a tool's publish that its settler has not synced yet finds the
// version the publish recorded, although the rename moved the file's ctime
// past the recorded fingerprint: it commits nothing (before, it committed
// the same version again, durably, inside the read).
func TestReadBeforeSettleCommitsNothing(t *testing.T) {
	for _, create := range []bool{false, true} {
		t.Run(fmt.Sprintf("create=%v", create), func(t *testing.T) {
			ts := openTestStore(t)
			intent := Intent{Kind: IntentCreateIfAbsent}
			if !create {
				ts.put("f", "before\n")
				intent = Intent{Kind: IntentReplaceIfVersion, Version: ts.version("f")}
			}
			ts.stopSettling()
			res, err := ts.WriteText(context.Background(), ts.target("f"), "the tool's\n", intent, ToolWriter("t"))
			must(t, err)
			ts.settle.mu.Lock()
			_, ok := ts.settle.pending["f"]
			ts.settle.mu.Unlock()
			if !ok {
				t.Fatal("the publish is not pending: nothing to read before its settling")
			}
			before, commits := ts.txID(), ts.commits.done.Load()
			for i := 0; i < 2; i++ {
				if _, v, err := ts.readAll("f"); err != nil || v != res.Version {
					t.Fatalf("Read: %s, %v; want %s", v, err, res.Version)
				}
				data, v, err := ts.ReadBytes(context.Background(), ts.target("f"), 1<<20)
				if err != nil || v != res.Version || string(data) != "the tool's\n" {
					t.Fatalf("ReadBytes: %q %s, %v; want the tool's bytes, %s", data, v, err, res.Version)
				}
			}
			if n, c := ts.txID()-before, ts.commits.done.Load()-commits; n != 0 || c != 0 {
				t.Fatalf("the reads made %d write transactions (%d commits), want none", n, c)
			}
			h, err := ts.History("f")
			must(t, err)
			if len(h) == 0 || h[0].Version != res.Version || h[0].Writer != ToolWriter("t") {
				t.Fatalf("history %+v, want the tool's version newest", h)
			}
			// A change after the publish is not taken for it.
			ts.put("f", "someone's\n")
			if _, v, err := ts.readAll("f"); err != nil || v != SumString("someone's\n") {
				t.Fatalf("Read after a change: %s, %v", v, err)
			}
			h, err = ts.History("f")
			must(t, err)
			if len(h) < 2 || h[0].Version != SumString("someone's\n") || h[1].Version != res.Version {
				t.Fatalf("history %+v, want the change over the tool's version", h)
			}
		})
	}
}
