package versionstore

import (
	"testing"
	"time"
)

// A tool write of a file being written through the mount waits for the
// writer to let go, and is told when it does: it does not ask over and
// over whether the file is still being written (a sleep loop asked every
// 2 ms, 50 times in the 100 ms a writer held the file here).
func TestToolWriteWaitsForTheWriterWithoutPolling(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "one")
	ts.version("f")
	ts.markWriting("f")
	done := make(chan error, 1)
	go func() {
		_, err := ts.write("f", "two", anyway)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if asked, waits := ts.writingSet.questions(); asked+waits > 0 {
			break // the write is waiting
		}
		time.Sleep(time.Millisecond)
	}
	asked, _ := ts.writingSet.questions()
	began := time.Now()
	time.Sleep(100 * time.Millisecond) // the writer holds the file: the write waits
	now, _ := ts.writingSet.questions()
	meanwhile := now - asked
	ts.doneWriting("f")
	held := time.Since(began)
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the write still waits 5 s after the writer let go")
	}
	if meanwhile > 1 {
		t.Fatalf("while the writer held f the waiting write asked %d times whether it was still being written; it should wait to be told", meanwhile)
	}
	if err != nil && held >= writerGrace {
		// A loaded machine slept past the grace: the write was refused, as
		// it must be while the writer holds the file.
		wantErr(t, err, ReasonMountWriting, "write", "/ws/f")
		return
	}
	must(t, err)
	if got := ts.version("f"); got != SumString("two") {
		t.Fatal("the write did not land after the writer let go")
	}
}

// askWhileWriting runs ask while key, holding content, is being written
// through the mount, its version not committed yet: as right after a
// shell's `echo > f`, whose close returned before the kernel's release
// (with passthrough the release commits the version). Once ask waits for
// the writer, the writer lets go as the mount's last release does. It
// returns how long ask took.
func askWhileWriting(ts *testStore, key, content string, ask func()) time.Duration {
	ts.t.Helper()
	ts.markWriting(key)
	ts.put(key, content)
	_, waitsBefore := ts.writingSet.questions()
	done := make(chan time.Duration, 1)
	go func() {
		began := time.Now()
		ask()
		done <- time.Since(began)
	}()
	waiting := func() bool { _, waits := ts.writingSet.questions(); return waits > waitsBefore }
	for deadline := time.Now().Add(10 * time.Second); !waiting(); {
		select {
		case took := <-done:
			ts.doneWriting(key)
			return took // it did not wait
		case <-time.After(time.Millisecond):
			if time.Now().After(deadline) {
				ts.t.Fatal("neither waits for the writer nor answers after 10 s")
			}
		}
	}
	unlock := ts.locks.Lock(key)
	_, err := ts.mount.Refresh(key, shell) // the last writer's release
	unlock()
	must(ts.t, err)
	ts.doneWriting(key)
	select {
	case took := <-done:
		return took
	case <-time.After(10 * time.Second):
		ts.t.Fatal("still waits 10 s after the writer let go")
	}
	return 0
}

// A history asked for while the mount is writing the file waits for the
// writer to let go and then holds its version. A file nobody writes is
// asked once and not waited for.
func TestHistoryWaitsForTheWriterToLetGo(t *testing.T) {
	ts := openTestStore(t)
	var h []HistoryEntry
	var err error
	took := askWhileWriting(ts, "f", "by the shell\n", func() { h, err = ts.History("f") })
	must(t, err)
	switch {
	case len(h) > 0 && h[0].Version == SumString("by the shell\n") && h[0].Writer == shell:
	case len(h) == 0 && took >= writerGrace:
		// A loaded machine let the grace pass before the release: the
		// history answered without it, as it must not wait longer.
	default:
		t.Fatalf("history %+v after %v, want the shell's version: it did not wait for the writer", h, took)
	}
	asked, waits := ts.writingSet.questions()
	if _, err := ts.History("other"); err != nil {
		t.Fatal(err)
	}
	if a, w := ts.writingSet.questions(); w != waits || a > asked+1 {
		t.Fatalf("a history of a file nobody writes asked %d times and waited %d times", a-asked, w-waits)
	}
}

// The workspace's log asked for while the mount is writing a file waits
// for its writers to let go, and then shows the write.
func TestLogWaitsForTheWritersToLetGo(t *testing.T) {
	ts := openTestStore(t)
	var log []Change
	var err error
	took := askWhileWriting(ts, "f", "by the shell\n", func() { log, err = ts.Changes(ChangeQuery{}) })
	must(t, err)
	switch {
	case len(log) > 0 && log[0].Path == "f" && log[0].Version == SumString("by the shell\n") && log[0].Writer == shell:
	case len(log) == 0 && took >= writerGrace:
		// The grace passed before the release (see above).
	default:
		t.Fatalf("log %+v after %v, want the shell's write: it did not wait for the writer", log, took)
	}
}
