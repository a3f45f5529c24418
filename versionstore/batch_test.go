package versionstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The mount's versions wait in memory until the batch interval passes or
// the batch is full; a full batch is committed by the flush loop, so the
// writer that filled it does not wait for the disk, until the batch
// reaches the stall limit.
func TestMountBatchIsCommittedByTheLoopWhenFull(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.MountBatchInterval = time.Hour })
	sh := Writer{Kind: WriterMount, Pid: 42, Comm: "sh"}
	for i := range batchFull + batchStall {
		if err := os.WriteFile(filepath.Join(ts.dir, fmt.Sprint(i)), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refresh := func(i int) {
		t.Helper()
		if _, err := ts.mount.Refresh(fmt.Sprint(i), sh); err != nil {
			t.Fatal(err)
		}
	}
	start := ts.commits.done.Load()
	for i := range batchFull - 1 {
		refresh(i)
	}
	if n := ts.commits.done.Load() - start; n != 0 {
		t.Fatalf("%d commits before the batch was full or its interval passed; want 0", n)
	}

	// Filling the batch must not commit in the writer: with the commit
	// slot held, a writer that flushed would block here.
	ts.mount.flushing.Lock()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		refresh(batchFull - 1)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		ts.mount.flushing.Unlock()
		t.Fatal("the writer that filled the batch waited for its commit")
	}
	ts.mount.flushing.Unlock()
	waitFor(t, "the flush loop to commit the full batch", func() bool { return ts.commits.done.Load() > start })
	if n := ts.pendingLen(); n != 0 {
		t.Fatalf("%d versions still pending after the full batch's commit", n)
	}

	// At the stall limit the writer commits itself: memory stays bounded.
	ts.mount.flushing.Lock()
	for i := batchFull; i < batchFull+batchStall-1; i++ {
		refresh(i)
	}
	stalled := make(chan struct{})
	go func() {
		defer close(stalled)
		refresh(batchFull + batchStall - 1)
	}()
	select {
	case <-stalled:
		ts.mount.flushing.Unlock()
		t.Fatal("the writer that reached the stall limit did not wait for the commit")
	case <-time.After(200 * time.Millisecond):
	}
	ts.mount.flushing.Unlock()
	<-stalled
	if n := ts.pendingLen(); n > batchFull {
		t.Fatalf("%d versions pending after the stalled writer's commit", n)
	}
}

func (s *Store) pendingLen() int {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	return len(s.mount.pending)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
