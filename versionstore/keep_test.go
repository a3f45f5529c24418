// Regression tests: each comment says what used to go wrong.

package versionstore

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Since a failed object file "drops only its bytes", syncPath records an
// outside change whose bytes could not be kept (state disk full, EIO,
// EMFILE; here objects/ is not a directory) as if it were kept, and
// rewindOne, finding the index in agreement, removes the file: those bytes
// exist nowhere any more, and the undo checkpoint the rewind made cannot
// bring them back. (Before the fix the failed commit left the index behind,
// and the rewind reported a conflict instead.)
func TestRewindRefusesToLoseUnkeptBytes(t *testing.T) {
	ts := openTestStore(t)
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	ts.mountWrite("big.bin", "created through the mount after the checkpoint\n")
	ts.flushPending()

	big := make([]byte, 3<<20) // incompressible: kept as an object file
	rand.NewChaCha8([32]byte{21}).Read(big)
	ts.put("big.bin", string(big)) // changed straight in the backing directory

	must(t, os.RemoveAll(ts.objects.dir))
	must(t, os.WriteFile(ts.objects.dir, nil, 0o600)) // object files cannot be written

	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	must(t, err)
	if _, err := os.Stat(ts.path("big.bin")); err != nil && !ts.hasObject(Sum(big)) {
		t.Fatalf("rewind %+v removed big.bin; its bytes were never kept and are gone", res)
	}
}

// A collection deletes object entries in a transaction that is not synced
// (the index syncs once a second) and removes the object files at once. A
// crash before the sync brings the entries back without their files. The
// index then says the bytes are kept (hasObject), so commit and Preserve
// never keep them again when the same version comes back — here a file
// returns to an old content, as a `git checkout` of an old commit does —
// and a rewind to a checkpoint with that content fails: "bytes not kept".
func TestCollectedThenCrashedObjectIsKeptAgain(t *testing.T) {
	clock := &testClock{}
	ts := openTestStore(t, func(o *Options) { o.RetainAge, o.Now = time.Hour, clock.now })
	big := make([]byte, 3<<20)
	rand.NewChaCha8([32]byte{22}).Read(big)
	v := Sum(big)
	ts.mountWrite("f.bin", string(big))
	ts.mountWrite("f.bin", "replaced\n") // v no longer current, no checkpoint
	ts.flushPending()
	clock.advance(2 * time.Hour) // older than the retention age

	// The index as it is on disk before the collection's transaction is
	// synced.
	synced := ts.index + ".synced"
	must(t, ts.db.View(func(tx *bolt.Tx) error { return tx.CopyFile(synced, 0o600) }))
	res, err := ts.GC(nil)
	must(t, err)
	if res.Removed == 0 {
		t.Fatalf("GC %+v collected nothing: the bytes of a replaced, uncheckpointed version past the retention age must go", res)
	}
	// Crash: the unsynced transaction is lost, the removed file stays removed.
	must(t, ts.Close())
	must(t, os.Rename(synced, ts.index))
	ts.open()

	ts.mountWrite("f.bin", string(big)) // the old content comes back
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	ts.mountWrite("f.bin", "later\n")
	rw, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	must(t, err)
	if got, _ := os.ReadFile(ts.path("f.bin")); string(got) != string(big) {
		t.Fatalf("rewind %+v: f.bin not restored; the bytes of %s were in hand at the capture but never kept again", rw, v)
	}
}
