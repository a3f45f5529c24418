package versionstore

import (
	"context"
	"testing"
	"time"
)

// waitRecordGone waits, a bounded while, for key's unsettled record to
// leave the index; it reports whether it did.
func (ts *testStore) waitRecordGone(key string) bool {
	ts.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, ok := ts.unsettledRecord(key); !ok {
			return true
		}
	}
	return false
}

// Once a tool's publish is on disk its record goes, without waiting for
// some other commit: a change made straight into the backing directory
// after that (a checkout putting the old bytes back) is no lost publish,
// and a power cut later must not undo it.
func TestSettledRecordGoesWithoutAnotherCommit(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "before\n")
	v := ts.version("f")
	_, err := ts.WriteText(context.Background(), ts.target("f"), "the tool's\n", Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("t"))
	must(t, err)
	ts.waitSynced()
	gone := ts.waitRecordGone("f")
	ts.stopSettling()
	ts.put("f", "before\n") // `git checkout f` in the backing directory, then the cut
	ts.restartAfterCut()
	if got := ts.get("f"); got != "before\n" {
		t.Fatalf("f holds %q after the restart (record gone after the settling: %v): the checkout made after the publish had settled was undone", got, gone)
	}
}
