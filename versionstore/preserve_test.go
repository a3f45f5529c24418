package versionstore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A file closed through the mount a moment ago is the version its commit
// found: the next writer's Preserve reads it again only if the filesystem
// cannot prove it unchanged. With fine ctimes (probeFineCtime) it can, the
// commit waiting in the batch or in the index alike; with coarse ones the
// racy rule holds and it reads. fsstress opens each file for writing
// again within milliseconds; reading it each time doubled the hashing.
func TestPreserveOfAFileJustCommittedReadsNothing(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.MountBatchInterval = time.Hour })
	sh := Writer{Kind: WriterMount, Pid: 42, Comm: "sh"}
	if err := os.WriteFile(filepath.Join(ts.dir, "f"), bytes.Repeat([]byte("x"), 100<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.mount.Refresh("f", sh); err != nil {
		t.Fatal(err)
	}
	want := 1 // the commit
	if !ts.fineCtime {
		want = 2 // the commit and the bytes read again
		t.Logf("%s has coarse ctimes: the racy rule applies", ts.dir)
	}
	ts.mount.Preserve("f")
	if n := ts.pendingLen(); n != want {
		t.Fatalf("Preserve of a file whose commit waits in the batch: %d changes queued, want %d", n, want)
	}
	ts.mount.flush()
	ts.mount.Preserve("f")
	if n := ts.pendingLen(); n != want-1 {
		t.Fatalf("Preserve of a file just committed to the index: %d changes queued, want %d", n, want-1)
	}
}

// What an outside write leaves in the same clock tick as the commit before
// it, with its size and mtime put back, is still kept before the next
// change: the racy rule's reason, which fine ctimes must not lose.
func TestPreserveKeepsAChangeMadeRightAfterACommit(t *testing.T) {
	for _, queued := range []bool{true, false} {
		ts := openTestStore(t, func(o *Options) { o.MountBatchInterval = time.Hour })
		sh := Writer{Kind: WriterMount, Pid: 42, Comm: "sh"}
		path := filepath.Join(ts.dir, "f")
		if err := os.WriteFile(path, []byte("before"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.mount.Refresh("f", sh); err != nil {
			t.Fatal(err)
		}
		if !queued {
			ts.mount.flush()
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("behind"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		ts.mount.Preserve("f")
		ts.mount.flush()
		got, err := ts.Object(Sum([]byte("behind")))
		if err != nil || string(got) != "behind" {
			t.Fatalf("queued=%v: the bytes written behind the commit were not kept: %q, %v", queued, got, err)
		}
	}
}

// The batch holds the bytes it will keep compressed: packed by the writer
// that queued them, they count at their kept size against the batch's
// limits, so files of zeros do not stall the writers.
func TestQueuedBytesArePackedByTheirWriter(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.MountBatchInterval = time.Hour })
	sh := Writer{Kind: WriterMount, Pid: 42, Comm: "sh"}
	zeros := make([]byte, 4<<20)
	if err := os.WriteFile(filepath.Join(ts.dir, "z"), zeros, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := ts.mount.Refresh("z", sh)
	if err != nil {
		t.Fatal(err)
	}
	if n := ts.mount.queuedBytes(); n <= 0 || n > 64<<10 {
		t.Fatalf("the batch holds %d bytes for 4 MiB of zeros; want them packed (0 < n <= 64 KiB)", n)
	}
	ts.mount.flush()
	got, err := ts.Object(v)
	if err != nil || !bytes.Equal(got, zeros) {
		t.Fatalf("the packed bytes read back: %d bytes, %v", len(got), err)
	}
}

// A tool's publish records the stat it takes after its rename: a write
// straight into the backing directory between the two is in that stat but
// not in the recorded version. Only a stat taken before the bytes were read
// proves them (statFirst); this one does not, and the next change through
// the mount keeps what that write left.
func TestPreserveKeepsAWriteBetweenAPublishAndItsStat(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.MountBatchInterval = time.Hour })
	path := filepath.Join(ts.dir, "f")
	ts.afterPublish = func() {
		if err := os.WriteFile(path, []byte("outside"), 0o644); err != nil {
			t.Error(err)
		}
	}
	if _, err := ts.WriteText(context.Background(), ts.target("f"), "tool", Intent{}, ToolWriter("a")); err != nil {
		t.Fatal(err)
	}
	ts.afterPublish = nil
	ts.mount.flush()
	ts.mount.Preserve("f")
	ts.mount.flush()
	if got, err := ts.Object(Sum([]byte("outside"))); err != nil || string(got) != "outside" {
		t.Fatalf("the bytes written between the publish and its stat were not kept: %q, %v", got, err)
	}
}
