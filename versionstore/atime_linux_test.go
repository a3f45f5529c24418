package versionstore

import (
	"context"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The store's own reads — a tool's read, hashing a file a walk or the
// watcher found changed — open files with O_NOATIME: they leave access
// times as they were, which xfstests' atime tests (and users) look at. A
// plain read of the same file moves its access time (relatime: the access
// time is older than the modification time).
func TestStoreReadsLeaveAccessTimes(t *testing.T) {
	ts := openTestStore(t)
	for _, rel := range []string{"control", "read", "walked"} {
		ts.put(rel, "bytes\n")
		agedAtime(t, ts.path(rel))
	}
	before := atimeOf(t, ts.path("control"))
	if _, err := os.ReadFile(ts.path("control")); err != nil {
		t.Fatal(err)
	}
	if atimeOf(t, ts.path("control")) == before {
		t.Skip("a plain read leaves access times here (a noatime mount)")
	}
	want := atimeOf(t, ts.path("read"))
	if _, _, err := ts.readAll("read"); err != nil {
		t.Fatal(err)
	}
	if got := atimeOf(t, ts.path("read")); got != want {
		t.Errorf("a tool read moved the access time from %v to %v", want, got)
	}
	want = atimeOf(t, ts.path("walked"))
	if _, err := ts.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := atimeOf(t, ts.path("walked")); got != want {
		t.Errorf("a walk hashing the file moved its access time from %v to %v", want, got)
	}
}

// agedAtime sets p's access time an hour before its modification time, so
// that a read under relatime updates it.
func agedAtime(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime().Add(-time.Hour), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

func atimeOf(t *testing.T, p string) time.Time {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(st.Atim.Unix())
}
