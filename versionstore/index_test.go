package versionstore

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestHistorySurvivesReopen(t *testing.T) {
	ts := openTestStore(t)
	_, err := ts.write("f", "one", anyway)
	must(t, err)
	_, err = ts.write("f", "two", anyway)
	must(t, err)
	ts.reopen()
	h, err := ts.History("f")
	must(t, err)
	if len(h) != 2 || h[0].Version != SumString("two") || h[1].Version != SumString("one") || h[0].Writer != ToolWriter("agent") {
		t.Fatalf("history after reopen = %+v", h)
	}
	if h[0].Size != 3 || h[0].Time.IsZero() {
		t.Fatalf("entry = %+v", h[0])
	}
}

func TestHistoryBounded(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.HistoryLimit = 3 })
	for i := range 10 {
		_, err := ts.write("f", strings.Repeat("x", i+1), anyway)
		must(t, err)
	}
	h, err := ts.History("f")
	must(t, err)
	if len(h) != 3 || h[0].Size != 10 || h[2].Size != 8 {
		t.Fatalf("history = %+v", h)
	}
	must(t, ts.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketHistory).Stats().KeyN; n != 3 {
			t.Errorf("%d history keys stored, want 3", n)
		}
		return nil
	}))
}

// The racy rule: a fingerprint recorded close to the file's own timestamps
// proves nothing, so the store rehashes; an old enough one is trusted.
// The test plants a wrong version beside a matching fingerprint to see which
// of the two the store believed.
func TestFingerprintTrustAndRacyRule(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "real bytes")
	fi, err := os.Stat(ts.path("f"))
	must(t, err)
	planted := SumString("planted")
	plant := func(recorded time.Time) {
		must(t, ts.db.Update(func(tx *bolt.Tx) error {
			return putRecord(tx, "f", record{Version: planted, FP: fingerprintOf(fi), Recorded: recorded.UnixNano()})
		}))
	}
	probe := func() Version {
		unlock := ts.locks.Lock("f")
		defer unlock()
		c, err := ts.probeLocked(ts.target("f"), "write", External)
		must(t, err)
		return c.version
	}

	plant(time.Now()) // recorded in the same instant as the file's mtime: racy
	if probe() != SumString("real bytes") {
		t.Fatal("racy entry was trusted")
	}
	plant(fi.ModTime().Add(racyWindow + time.Second)) // recorded well after: trusted
	if probe() != planted {
		t.Fatal("clean entry with a matching fingerprint was rehashed")
	}
	ts.markWriting("f")
	if probe() != SumString("real bytes") {
		t.Fatal("dirty entry was trusted")
	}
}

func TestRacy(t *testing.T) {
	now := time.Now().UnixNano()
	old := now - int64(10*time.Second)
	for _, tc := range []struct {
		fp   fingerprint
		racy bool
	}{
		{fingerprint{MtimeNs: old, CtimeNs: old}, false},
		{fingerprint{MtimeNs: now, CtimeNs: old}, true},
		{fingerprint{MtimeNs: old, CtimeNs: now - int64(time.Second)}, true},
	} {
		if got := tc.fp.racy(now); got != tc.racy {
			t.Errorf("%+v racy = %v, want %v", tc.fp, got, tc.racy)
		}
	}
}

func TestOpenRefusesIndexInsideWorkspace(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir, filepath.Join(dir, ".state", "index.db"), Options{})
	if err == nil || !strings.Contains(err.Error(), "inside the workspace") {
		t.Fatalf("err = %v", err)
	}
}

func TestOpenRefusesSecondOpener(t *testing.T) {
	ts := openTestStore(t)
	_, err := Open(ts.dir, ts.index, Options{})
	if err == nil || !strings.Contains(err.Error(), "another process holds it") {
		t.Fatalf("err = %v", err)
	}
}

// A damaged index is moved aside and a new one started: versions are
// recomputed from the files, so tools keep working.
func TestDamagedIndexMovedAside(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "bytes")
	ts.version("f")
	must(t, ts.Close())
	must(t, os.WriteFile(ts.index, []byte(strings.Repeat("garbage!", 4096)), 0o600))
	ts.open()
	if v := ts.version("f"); v != SumString("bytes") {
		t.Fatal("wrong version after rebuild")
	}
	aside, _ := filepath.Glob(ts.index + ".damaged-*")
	if len(aside) != 1 {
		t.Fatalf("damaged index not kept aside: %v", aside)
	}
}

// An unclean shutdown (no Close) leaves the clean mark unset; the next open
// checks the file and carries on.
func TestUncleanShutdownChecked(t *testing.T) {
	ts := openTestStore(t)
	_, err := ts.write("f", "one", anyway)
	must(t, err)
	// Simulate a crash: stop the store's goroutine and release the file
	// without marking it clean.
	close(ts.stopSync)
	ts.syncDone.Wait()
	must(t, ts.db.Close())
	must(t, ts.root.Close())
	ts.open()
	h, err := ts.History("f")
	must(t, err)
	if len(h) != 1 {
		t.Fatalf("history = %+v", h)
	}
}

func TestLocksReleased(t *testing.T) {
	var l Locks
	var wg sync.WaitGroup
	counter := 0
	for range 50 {
		wg.Go(func() {
			unlock := l.Lock2("a", "b")
			counter++
			unlock()
		})
		wg.Go(func() {
			unlock := l.Lock2("b", "a")
			counter++
			unlock()
		})
	}
	wg.Wait()
	if counter != 100 || l.Len() != 0 {
		t.Fatalf("counter %d, %d locks left", counter, l.Len())
	}
}
