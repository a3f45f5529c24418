package versionstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// syncLog is what traceSync reported, from any goroutine.
type syncLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *syncLog) get() []string { l.mu.Lock(); defer l.mu.Unlock(); return slices.Clone(l.ops) }
func (l *syncLog) reset()        { l.mu.Lock(); defer l.mu.Unlock(); l.ops = nil }

// recordSyncs records traceSync's events until the test ends.
func recordSyncs(t *testing.T) *syncLog {
	l := &syncLog{}
	traceSync = func(op, name string) { l.mu.Lock(); l.ops = append(l.ops, op+" "+name); l.mu.Unlock() }
	t.Cleanup(func() { traceSync = nil })
	return l
}

// A publish that syncs (with SyncPublishes, a restore's, or one too large
// to ride its commit) is durable before the write returns: the directory that holds it is
// synced after the link or rename, and a directory the publish made is
// synced into its parent first.
func TestPublishSyncsItsDirectory(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.SyncPublishes = true })
	ops := recordSyncs(t)
	tg := Target{Key: "a/b/f", Display: "/ws/a/b/f"}
	res, err := ts.WriteText(context.Background(), tg, "one\n", Intent{Kind: IntentCreateIfAbsent}, ToolWriter("t"))
	must(t, err)
	want := []string{"sync .", "sync a", "link a/b/f", "sync a/b"}
	if got := ops.get(); !slices.Equal(got, want) {
		t.Fatalf("create: %q, want %q", got, want)
	}
	ops.reset()
	// The index commit comes after: work committed with the version sees
	// the directory synced.
	committed := func(_ *bolt.Tx, _ Version) error { traceSync("commit", tg.Key); return nil }
	_, err = ts.WriteText(context.Background(), tg, "two\n", Intent{Kind: IntentReplaceIfVersion, Version: res.Version}, ToolWriter("t"), committed)
	must(t, err)
	if got, want := ops.get(), []string{"rename a/b/f", "sync a/b", "commit a/b/f"}; !slices.Equal(got, want) {
		t.Fatalf("replace: %q, want %q", got, want)
	}
	ops.reset()
	_, err = ts.WriteText(context.Background(), Target{Key: "top", Display: "/ws/top"}, "x\n", Intent{}, ToolWriter("t"))
	must(t, err)
	if got, want := ops.get(), []string{"rename top", "sync ."}; !slices.Equal(got, want) {
		t.Fatalf("top level: %q, want %q", got, want)
	}
	if u, ok := ts.unsettledRecord("top"); ok {
		t.Fatalf("a synced publish left an unsettled record %+v", u)
	}
}

// An object kept in a file is named durably before the index names it: its
// directory is synced after the rename, and the directories made for it
// into their parents.
func TestObjectFileSyncsItsDirectory(t *testing.T) {
	ts := openTestStore(t)
	ops := recordSyncs(t)
	big := make([]byte, 3<<20) // random: compressed, still over inlineLimit
	rand.Read(big)
	v := Sum(big)
	_, err := ts.WriteText(context.Background(), Target{Key: "big", Display: "/ws/big"}, string(big), Intent{}, ToolWriter("t"))
	must(t, err)
	h := hex.EncodeToString(v[:])
	var objs []string
	for _, op := range ops.get() {
		if strings.Contains(op, " state") {
			objs = append(objs, op)
		}
	}
	want := []string{"sync state", "sync state/objects", "rename state/objects/" + h[:2] + "/" + h[2:], "sync state/objects/" + h[:2]}
	if !slices.Equal(objs, want) {
		t.Fatalf("object file: %q, want %q", objs, want)
	}
}

// txID is the index's last committed transaction: one more per commit.
func (ts *testStore) txID() int {
	var id int
	must(ts.t, ts.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }))
	return id
}

// A caller's AlsoCommit lands in the transaction that records its version:
// an edit makes one commit. One that fails loses its own work, never the
// version's record.
func TestAlsoCommitSharesTheVersionsCommit(t *testing.T) {
	ts := openTestStore(t)
	must(t, ts.db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("caller")); return err }))
	ts.put("f", "MARK-A\n")
	v := ts.version("f")
	noted := func(tx *bolt.Tx, v Version) error { return tx.Bucket([]byte("caller")).Put([]byte("f"), v[:]) }
	ts.stopSettling() // its commits after the acknowledgement would blur the count
	before := ts.txID()
	res, err := editText(context.Background(), ts.Store, ts.target("f"), Edit{Old: "MARK-A", New: "MARK-B"}, &v, ToolWriter("t"), noted)
	must(t, err)
	if n := ts.txID() - before; n != 1 {
		t.Errorf("edit made %d commits, want 1", n)
	}
	must(t, ts.db.View(func(tx *bolt.Tx) error {
		if got := tx.Bucket([]byte("caller")).Get([]byte("f")); string(got) != string(res.Version[:]) {
			t.Errorf("caller's work recorded %x, want %s", got, res.Version)
		}
		return nil
	}))
	failing := func(*bolt.Tx, Version) error { return errors.New("no room") }
	res, err = editText(context.Background(), ts.Store, ts.target("f"), Edit{Old: "MARK-B", New: "MARK-C"}, &res.Version, ToolWriter("t"), failing)
	must(t, err)
	h, err := ts.History("f")
	must(t, err)
	if h[0].Version != res.Version || h[0].Writer != ToolWriter("t") {
		t.Errorf("after a failed AlsoCommit the newest version is %+v, want %s by the tool", h[0], res.Version)
	}
}
