package versionstore

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// crash stops ts as a power cut would find it: no clean mark, no Close.
func (ts *testStore) crash() {
	ts.t.Helper()
	close(ts.stopSync)
	ts.syncDone.Wait()
	must(ts.t, ts.db.Close())
	must(ts.t, ts.root.Close())
	ts.closeMu.Do(func() {}) // a later Close of this store is a no-op
}

// fillIndex writes n files through the store, enough that the files and
// history buckets span branch pages.
func fillIndex(ts *testStore, n int) {
	ts.t.Helper()
	for i := range n {
		_, err := ts.write(fmt.Sprintf("d%02d/%s-%04d.txt", i%10, strings.Repeat("file", 40), i), strings.Repeat("line\n", i%40+1), anyway)
		must(ts.t, err)
	}
}

// rawOf reads the closed index at path without bbolt.
func rawOf(t *testing.T, path string) (*rawIndex, *os.File) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	t.Cleanup(func() { f.Close() })
	fi, err := f.Stat()
	must(t, err)
	r, err := openRawIndex(f, fi.Size())
	must(t, err)
	return r, f
}

// bucketRoot is the root page of a top-level bucket of the closed index.
func bucketRoot(t *testing.T, r *rawIndex, name []byte) uint64 {
	t.Helper()
	v, isBucket, err := r.lookup(nil, name)
	if err != nil || !isBucket {
		t.Fatalf("bucket %s: %v", name, err)
	}
	root := binary.LittleEndian.Uint64(v)
	if root == 0 {
		t.Fatalf("bucket %s is inline", name)
	}
	return root
}

// openWithin opens ts again in a goroutine and fails if that does not
// return within d: a damaged index must not hang the start.
func openWithin(ts *testStore, d time.Duration) {
	ts.t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		s, err := Open(ts.dir, ts.index, Options{})
		if err != nil {
			panic(err)
		}
		ts.Store = s
	}()
	select {
	case p := <-done:
		if p != nil {
			ts.t.Fatalf("open of a damaged index: %v", p)
		}
	case <-time.After(d):
		ts.t.Fatalf("open of a damaged index did not return within %v", d)
	}
}

// A damaged index opens without panic or hang: each corruption of a real
// index's pages (as a torn or misdirected write would leave it) is found
// before bbolt follows it, and the store starts on a sound index.
func TestDamagedIndexOpensWithinDeadline(t *testing.T) {
	// A descent that never ends fails fast instead of growing to 1 GB.
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	le := binary.LittleEndian
	corruptions := map[string]func(t *testing.T, r *rawIndex, f *os.File){
		// A branch page whose first child is itself: bbolt's check and
		// cursors descend forever.
		"branch cycle": func(t *testing.T, r *rawIndex, f *os.File) {
			id := bucketRoot(t, r, bucketHistory)
			buf, err := r.page(id)
			must(t, err)
			if le.Uint16(buf[8:]) != branchPageFlag {
				t.Fatalf("history root %d is not a branch", id)
			}
			le.PutUint64(buf[pageHeaderSize+8:], id)
			_, err = f.WriteAt(buf, int64(id)*int64(r.meta.pageSize))
			must(t, err)
		},
		// A freelist count torn to a huge number.
		"freelist count": func(t *testing.T, r *rawIndex, f *os.File) {
			var b [16]byte
			le.PutUint16(b[0:], 0xFFFF)
			le.PutUint64(b[2:], 1<<40)
			_, err := f.WriteAt(b[:10], int64(r.meta.freelist)*int64(r.meta.pageSize)+10)
			must(t, err)
		},
		// A branch page's type byte flipped: bbolt asserts "Page expected
		// to be branch or leaf" and panics.
		"page type": func(t *testing.T, r *rawIndex, f *os.File) {
			id := bucketRoot(t, r, bucketFiles)
			_, err := f.WriteAt([]byte{freelistFlag, 0}, int64(id)*int64(r.meta.pageSize)+8)
			must(t, err)
		},
		// A page torn in half: its second half from another page.
		"torn page": func(t *testing.T, r *rawIndex, f *os.File) {
			id := bucketRoot(t, r, bucketFiles)
			ps := int64(r.meta.pageSize)
			half := make([]byte, ps/2)
			_, err := f.ReadAt(half, (int64(r.meta.pgid)-1)*ps)
			must(t, err)
			_, err = f.WriteAt(half, int64(id)*ps+ps/2)
			must(t, err)
		},
	}
	for seed := range 6 {
		corruptions[fmt.Sprintf("random pages %d", seed)] = func(t *testing.T, r *rawIndex, f *os.File) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			ps := int64(r.meta.pageSize)
			for range 3 {
				junk := make([]byte, ps/int64(1+rng.IntN(4)))
				for i := range junk {
					junk[i] = byte(rng.UintN(256))
				}
				_, err := f.WriteAt(junk, (2+rng.Int64N(int64(r.meta.pgid)-2))*ps)
				must(t, err)
			}
		}
	}
	for name, corrupt := range corruptions {
		t.Run(name, func(t *testing.T) {
			ts := openTestStore(t)
			fillIndex(ts, 80)
			ts.crash()
			r, f := rawOf(t, ts.index)
			corrupt(t, r, f)
			f.Close()
			openWithin(ts, 30*time.Second)
			if v := ts.version("d01/" + strings.Repeat("file", 40) + "-0001.txt"); v != SumString("line\nline\n") {
				t.Fatalf("version after the damaged start: %s", v)
			}
		})
	}
}

// A clean mark left behind by a start whose clearing of it never reached
// the disk (later commits did) is stale: the start checks the index anyway.
func TestStaleCleanMarkIsChecked(t *testing.T) {
	ts := openTestStore(t)
	fillIndex(ts, 80)
	must(t, ts.Close())
	// Later commits on the file that still carries the mark.
	db, err := bolt.Open(ts.index, 0o600, nil)
	must(t, err)
	must(t, db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte("later"), []byte("commit"))
	}))
	must(t, db.Close())
	r, f := rawOf(t, ts.index)
	id := bucketRoot(t, r, bucketFiles)
	_, err = f.WriteAt([]byte{freelistFlag, 0}, int64(id)*int64(r.meta.pageSize)+8)
	must(t, err)
	f.Close()
	openWithin(ts, 30*time.Second)
	if aside, _ := filepath.Glob(ts.index + ".damaged-*"); len(aside) != 1 {
		t.Fatalf("a damaged index behind a stale clean mark was served unchecked (kept aside: %v)", aside)
	}
}

// leafWithout is a child of the branch elems other than the first that
// does not hold key: where the leaves split depends on the entries' sizes,
// which vary with their timestamps (one run in 50 put the last write's
// history in the second leaf).
func leafWithout(elems []element, key []byte) uint64 {
	for i := 1; i < len(elems); i++ {
		holds := bytes.Compare(elems[i].key, key) <= 0 && (i+1 == len(elems) || bytes.Compare(key, elems[i+1].key) < 0)
		if !holds {
			return elems[i].child
		}
	}
	return elems[1].child
}

// A damaged index is salvaged, not discarded: what its readable pages hold
// (history, checkpoints, the journal) is copied into the new index, and the
// damaged file is kept for inspection.
func TestDamagedIndexSalvaged(t *testing.T) {
	ts := openTestStore(t)
	fillIndex(ts, 80)
	cp, err := ts.Checkpoint(context.Background(), "before", nil)
	must(t, err)
	// The same pages each run: every publish settled, and no settling
	// commit racing the cut.
	must(t, ts.settleWhere(everything, true))
	ts.stopSettling()
	_, err = ts.write("d00/late.txt", "late\n", anyway)
	must(t, err)
	ts.crash()
	r, f := rawOf(t, ts.index)
	// Tear one leaf page of the history: its entries are lost, the rest not.
	root := bucketRoot(t, r, bucketHistory)
	buf, err := r.page(root)
	must(t, err)
	_, elems, err := elements(buf)
	must(t, err)
	if len(elems) < 3 {
		t.Fatalf("history root has %d children", len(elems))
	}
	lost := leafWithout(elems, historyKey("d00/late.txt", 0))
	_, err = f.WriteAt(make([]byte, r.meta.pageSize), int64(lost)*int64(r.meta.pageSize))
	must(t, err)
	f.Close()
	openWithin(ts, 30*time.Second)
	if aside, _ := filepath.Glob(ts.index + ".damaged-*"); len(aside) != 1 {
		t.Fatalf("damaged index not kept for inspection: %v", aside)
	}
	if rep, ok := ts.salvaged(); !ok || rep.Lost != 1 || rep.Copied["checkpoints"] != 1 || rep.JournalSeq == 0 || rep.CompleteUntil.IsZero() {
		t.Fatalf("salvage report %+v (found: %v)", rep, ok)
	}
	if got, err := ts.FindCheckpoint("before"); err != nil || got.Seq != cp.Seq {
		t.Fatalf("checkpoint after salvage: %+v, %v", got, err)
	}
	kept := 0
	for i := range 80 {
		h, err := ts.History(fmt.Sprintf("d%02d/%s-%04d.txt", i%10, strings.Repeat("file", 40), i))
		must(t, err)
		if len(h) > 0 {
			kept++
		}
	}
	if kept < 40 || kept == 80 {
		t.Fatalf("%d of 80 files kept their history after one history page was lost", kept)
	}
	h, err := ts.History("d00/late.txt")
	must(t, err)
	if len(h) != 1 {
		t.Fatalf("history of the last write: %+v", h)
	}
	res, err := ts.Rewind(context.Background(), "before", RewindOptions{Writer: Writer{Kind: WriterRestore}})
	if err != nil || res.Conflicts != 0 {
		t.Fatalf("rewind after salvage: %+v, %v", res, err)
	}
	if _, err := os.Stat(ts.path("d00/late.txt")); !os.IsNotExist(err) {
		t.Fatal("the rewind after salvage left the file created after the checkpoint")
	}
}

// A consistency check that cannot finish fails the open after checkTimeout
// instead of hanging it, and moves nothing: the index may well be healthy
// (a large one on a busy machine). The next start checks it again.
func TestStalledCheckFailsOpen(t *testing.T) {
	ts := openTestStore(t)
	fillIndex(ts, 10)
	ts.crash()
	stall := make(chan struct{})
	defer close(stall)
	defer func(c func(*bolt.DB) error, d time.Duration) { boltCheck, checkTimeout = c, d }(boltCheck, checkTimeout)
	check := boltCheck
	boltCheck = func(*bolt.DB) error { <-stall; return nil }
	checkTimeout = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		s, err := Open(ts.dir, ts.index, Options{})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errCheckTimeout) {
			t.Fatalf("open with a stalled check: %v, want the check's timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("open with a stalled check did not return within 30s")
	}
	if aside, _ := filepath.Glob(ts.index + ".*"); len(aside) != 0 {
		t.Fatalf("an index whose check stalled was moved or copied: %v", aside)
	}
	boltCheck = check
	openWithin(ts, 30*time.Second)
	if _, ok := ts.salvaged(); ok {
		t.Error("an index whose check stalled was salvaged")
	}
	if h, err := ts.History("d01/" + strings.Repeat("file", 40) + "-0001.txt"); err != nil || len(h) != 1 {
		t.Fatalf("history after the check finished: %+v, %v", h, err)
	}
}

// A salvage re-attaches the kept objects stored as files whose entries it
// could not read: their bytes stay restorable.
func TestSalvageReattachesObjectFiles(t *testing.T) {
	ts := openTestStore(t)
	// Enough objects that their bucket is not inline, and one large
	// enough (incompressible) to be kept in a file.
	fillIndex(ts, 80)
	big := make([]byte, inlineLimit+(64<<10))
	cryptorand.Read(big)
	res, err := ts.write("big.bin", string(big), anyway)
	must(t, err)
	if _, err := ts.write("big.bin", "small now\n", anyway); err != nil {
		t.Fatal(err)
	}
	ts.crash()
	r, f := rawOf(t, ts.index)
	// The objects bucket's root page zeroed: every entry in it lost.
	id := bucketRoot(t, r, bucketObjects)
	_, err = f.WriteAt(make([]byte, r.meta.pageSize), int64(id)*int64(r.meta.pageSize))
	must(t, err)
	f.Close()
	openWithin(ts, 30*time.Second)
	got, err := ts.Object(res.Version)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the object file of a version was not re-attached: %v", err)
	}
}

// An index closed cleanly is trusted without a check; one that was not,
// or whose mark later commits outlived, is checked.
func TestCleanMarkNamesItsCommit(t *testing.T) {
	ts := openTestStore(t)
	fillIndex(ts, 5)
	must(t, ts.Close())
	if clean, err := examineIndex(ts.index); !clean || err != nil {
		t.Fatalf("a cleanly closed index: clean %v, %v", clean, err)
	}
	db, err := bolt.Open(ts.index, 0o600, nil)
	must(t, err)
	must(t, db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put([]byte("later"), []byte{1}) }))
	must(t, db.Close())
	if clean, err := examineIndex(ts.index); clean || err != nil {
		t.Fatalf("a mark later commits outlived: clean %v, %v", clean, err)
	}
	ts.open()
}
