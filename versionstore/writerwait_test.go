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
