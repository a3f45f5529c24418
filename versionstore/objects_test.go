// Regression tests: each comment says what used to go wrong.

package versionstore

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// writeFile skips any object file that already exists, without looking at
// it, and the file it renames into place is never fsynced. After a crash an
// object file can be left empty or short with no index entry naming it
// (neither was synced); when the same version is captured again, the good
// bytes in hand are thrown away, the index names the damaged file, and the
// version reads as corrupt for ever instead of being kept.
func TestLeftoverObjectFileIsReplaced(t *testing.T) {
	ts := openTestStore(t)
	big := make([]byte, 3<<20) // incompressible: kept as an object file
	rand.NewChaCha8([32]byte{7}).Read(big)
	v := Sum(big)
	// What a crash leaves: the file renamed into place, its data never written.
	p := ts.objects.path(v)
	must(t, os.MkdirAll(filepath.Dir(p), 0o700))
	must(t, os.WriteFile(p, nil, 0o600))

	ts.mountWrite("big.bin", string(big)) // captured again, bytes in hand
	if _, err := ts.Object(v); err != nil {
		t.Fatalf("object of a version just captured: %v", err)
	}
}

// Object reads a large object's file without the lock that orders object
// files against collection. A collection that commits while a read
// transaction has already seen the object, and removes its file, makes the
// read report "stored bytes are corrupt" (HTTP 500) for bytes that were
// merely collected (ErrNotKept, 404).
func TestCollectedObjectIsNotKeptNotCorrupt(t *testing.T) {
	clock := &testClock{}
	ts := openTestStore(t, func(o *Options) { o.RetainAge, o.Now = time.Hour, clock.now })
	big := make([]byte, 3<<20)
	rand.NewChaCha8([32]byte{8}).Read(big)
	v := Sum(big)
	ts.mountWrite("f.bin", string(big))
	ts.mountWrite("f.bin", "replaced\n") // v no longer current, no checkpoint
	ts.flushPending()
	clock.advance(2 * time.Hour) // older than the retention age
	// Free pages, so the collection below needs no remap (which would wait
	// for the reader).
	must(t, ts.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("pad"))
		if err != nil {
			return err
		}
		return b.Put([]byte("pad"), make([]byte, 8<<20))
	}))
	must(t, ts.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("pad")) }))

	tx, err := ts.db.Begin(false) // a reader (Object, Show, Diff) in flight
	must(t, err)
	done := make(chan error, 1)
	go func() { _, err := ts.GC(nil); done <- err }()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		tx.Rollback()
		t.Fatal("collection waited for the reader: it must not (the padding freed pages so it needs no remap)")
	}
	_, err = ts.objects.load(tx, v)
	tx.Rollback()
	if errors.Is(err, ErrCorrupt) {
		t.Fatalf("collected object read as %v; want ErrNotKept", err)
	}
}
