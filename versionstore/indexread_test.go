package versionstore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// damage replaces the value of key in bucket with bytes that do not decode,
// as a bad sector inside a sound page would leave it.
func (ts *testStore) damage(bucket []byte, key string) {
	ts.t.Helper()
	ts.flushPending()
	if err := ts.DB().Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(key), []byte("{not json"))
	}); err != nil {
		ts.t.Fatal(err)
	}
}

// hasObject is HasObject, failing the test if the index cannot say.
func (ts *testStore) hasObject(v Version) bool {
	ts.t.Helper()
	ok, err := ts.HasObject(v)
	if err != nil {
		ts.t.Fatal(err)
	}
	return ok
}

// salvaged is Salvaged, failing the test if the index cannot say.
func (ts *testStore) salvaged() (SalvageReport, bool) {
	ts.t.Helper()
	rep, ok, err := ts.Salvaged()
	if err != nil {
		ts.t.Fatal(err)
	}
	return rep, ok
}

// A file whose index entry cannot be read is not a file the index does not
// know: a restore over it stops before changing anything and says the
// index could not be read, naming the file.
func TestRestoreOverUnreadableEntry(t *testing.T) {
	ts := openTestStore(t)
	ts.put("a.txt", "one\n")
	v1 := ts.version("a.txt")
	ts.put("a.txt", "two\n")
	ts.version("a.txt")
	ts.damage(bucketFiles, "a.txt")

	_, err := ts.Restore(context.Background(), ts.target("a.txt"), v1, ToolWriter("me"))
	if got := ts.get("a.txt"); got != "two\n" {
		t.Errorf("a.txt = %q after a restore that could not read its index entry, want it untouched", got)
	}
	wantErr(t, err, ReasonIndexRead, "restore", "/ws/a.txt")
}

// A read of a file whose index entry cannot be read fails, naming the
// file, rather than taking the file for one the index never saw.
func TestReadOfUnreadableEntry(t *testing.T) {
	ts := openTestStore(t)
	ts.put("a.txt", "one\n")
	ts.version("a.txt")
	ts.put("a.txt", "two\n") // a new fingerprint: the entry is consulted
	ts.damage(bucketFiles, "a.txt")

	_, _, err := ts.readAll("a.txt")
	wantErr(t, err, ReasonIndexRead, "read", "/ws/a.txt")
}

// A walk that meets an entry it cannot read fails, and says the index
// could not be read; so does a status asking for a salvage report that no
// longer decodes, rather than saying there was none.
func TestWalkAndStatusOverUnreadableIndex(t *testing.T) {
	ts := openTestStore(t)
	ts.put("a.txt", "one\n")
	ts.version("a.txt")
	ts.damage(bucketFiles, "a.txt")
	_, err := ts.Checkpoint(context.Background(), "cp", nil)
	wantErr(t, err, ReasonIndexRead, "checkpoint", "")
	if !strings.Contains(err.Error(), `"a.txt"`) {
		t.Errorf("checkpoint error %q does not name a.txt", err)
	}

	ts.damage(bucketMeta, string(keySalvage))
	if rep, ok, err := ts.Salvaged(); err == nil {
		t.Errorf("damaged salvage report read as %+v (found: %v), want an error", rep, ok)
	}
}

// Once the index is closed, what asked it answers with an error, not
// "absent" or "not kept".
func TestClosedIndexIsNotAbsent(t *testing.T) {
	ts := openTestStore(t)
	ts.put("a.txt", "one\n")
	v := ts.version("a.txt")
	must(t, ts.DB().Close())
	if ok, err := ts.HasObject(v); err == nil {
		t.Errorf("HasObject on a closed index = %v, want an error", ok)
	}
	if b, err := ts.Baselined(); err == nil {
		t.Errorf("Baselined on a closed index = %v, want an error", b)
	}
	_, _, err := ts.readAll("a.txt")
	if CodeOf(err) != CodeIOError {
		t.Errorf("read through a closed index: %v, want FS_IO_ERROR", err)
	}
}

// The record of a tool's publish a crash may have lost that no longer
// decodes is not "nothing to finish": the start logs it, naming the file.
func TestUnreadableUnsettledRecordIsLogged(t *testing.T) {
	ts := openTestStore(t)
	ts.damage(bucketUnsettled, "a.txt")
	var log syncBuffer
	must(t, ts.Close())
	ts.open(func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	if got := log.String(); !strings.Contains(got, "path=a.txt") {
		t.Errorf("start over an unreadable unsettled record logged %q, want the file named", got)
	}
}

// syncBuffer is a bytes.Buffer safe for the store's goroutines to log to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
