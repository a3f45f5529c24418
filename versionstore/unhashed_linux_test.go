package versionstore

import (
	"context"
	"os"
	"testing"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// A file past the hashing limit is read whole, and versioned by its stat:
// its version is no hash of its bytes, changes when the file does, and the
// log says why its bytes are not kept.
func TestUnhashedFileIsVersionedByItsStat(t *testing.T) {
	ts := openTestStore(t)
	ts.put("big", "start\n")
	size := int64(DefaultCaptureMaxBytes + 1)
	if err := os.Truncate(ts.path("big"), size); err != nil {
		t.Fatal(err)
	}
	read := func() (Version, int64) {
		var n int64
		v, err := ts.Read(context.Background(), ts.target("big"), func(chunk []byte, _ bool) error {
			n += int64(len(chunk))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return v, n
	}
	v, n := read()
	fi, err := os.Stat(ts.path("big"))
	if err != nil {
		t.Fatal(err)
	}
	if n != size || v != unhashedVersion(fingerprintOf(fi)) {
		t.Fatalf("read %d bytes, version %s; want %d bytes, the stat's version %s", n, v.Short(), size, unhashedVersion(fingerprintOf(fi)).Short())
	}
	testfuse.ClockPast(t, ts.path("big")) // else the same inode, size and times
	if err := os.WriteFile(ts.path("big"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(ts.path("big"), size); err != nil {
		t.Fatal(err)
	}
	if v2, _ := read(); v2 == v {
		t.Errorf("the version did not change with the file")
	}
	h, err := ts.History("big")
	if err != nil || len(h) == 0 {
		t.Fatalf("history: %+v, %v", h, err)
	}
	if h[0].NotKept != NotKeptUnhashed {
		t.Errorf("not kept because %q, want %q", h[0].NotKept, NotKeptUnhashed)
	}
}
