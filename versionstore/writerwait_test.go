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

// A history asked for while the mount is writing the file, as right after
// a shell's `echo > f` whose close returned before the kernel's release
// (with passthrough the release commits the version), waits for the writer
// to let go and then holds its version. A file nobody writes is asked once
// and not waited for.
func TestHistoryWaitsForTheWriterToLetGo(t *testing.T) {
	ts := openTestStore(t)
	ts.markWriting("f")
	ts.put("f", "by the shell\n") // the bytes landed; the release commits them
	type answer struct {
		h    []HistoryEntry
		err  error
		took time.Duration
	}
	done := make(chan answer, 1)
	go func() {
		began := time.Now()
		h, err := ts.History("f")
		done <- answer{h, err, time.Since(began)}
	}()
	waiting := func() bool { _, waits := ts.writingSet.questions(); return waits > 0 }
	var a answer
	var answered bool
	for deadline := time.Now().Add(10 * time.Second); !waiting() && !answered; {
		select {
		case a = <-done:
			answered = true
		case <-time.After(time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("History neither waits for the writer nor answers after 10 s")
			}
		}
	}
	if !answered {
		unlock := ts.locks.Lock("f")
		_, err := ts.mount.Refresh("f", shell) // the last writer's release
		unlock()
		must(t, err)
		ts.doneWriting("f")
		select {
		case a = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("History still waits 10 s after the writer let go")
		}
	}
	must(t, a.err)
	switch {
	case len(a.h) > 0 && a.h[0].Version == SumString("by the shell\n") && a.h[0].Writer == shell:
	case len(a.h) == 0 && a.took >= writerGrace:
		// A loaded machine let the grace pass before the release: the
		// history answered without it, as it must not wait longer.
	default:
		t.Fatalf("history %+v after %v, want the shell's version: it did not wait for the writer", a.h, a.took)
	}
	asked, waits := ts.writingSet.questions()
	if _, err := ts.History("other"); err != nil {
		t.Fatal(err)
	}
	if a2, w2 := ts.writingSet.questions(); w2 != waits || a2 > asked+1 {
		t.Fatalf("a history of a file nobody writes asked %d times and waited %d times", a2-asked, w2-waits)
	}
}
