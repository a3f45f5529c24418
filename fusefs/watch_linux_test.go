package fusefs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// inotifyWatches counts the watches on the inotify descriptor fd.
func inotifyWatches(t *testing.T, fd int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("inotify wd:"))
}

// Watches are charged to the daemon's user, machine-wide: one a directory
// anyone made through the mount, without end. They are capped per mount;
// directories beyond the cap are not watched, and what the kernel caches
// from them it trusts for 1 s only, so a change made straight into the
// backing directory there still shows within about a second.
func TestWatchesAreCapped(t *testing.T) {
	const limit = 4
	m := mountT(t, func(o *Options) { o.MaxWatches = limit })
	if m.fs.watch == nil {
		t.Skip("the backing tree is not watched here")
	}
	for i := range 10 {
		if err := os.Mkdir(filepath.Join(m.mnt, fmt.Sprintf("d%d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The watcher adds the new directories' watches as their events
	// arrive: give it time to go past the cap if it would.
	if testfuse.WaitFor(2*time.Second, func() bool { return inotifyWatches(t, m.fs.watch.fd) > limit }) {
		t.Fatalf("%d watches with a cap of %d", inotifyWatches(t, m.fs.watch.fd), limit)
	}

	// d9 was made last: it is not watched. A name looked up there and
	// missing, then made straight in the backing directory, shows soon.
	missing, outside := filepath.Join(m.mnt, "d9", "new"), filepath.Join(m.backing, "d9", "new")
	if _, err := os.Lstat(missing); !os.IsNotExist(err) {
		t.Fatalf("lstat %s: %v", missing, err)
	}
	if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !testfuse.WaitFor(5*time.Second, func() bool { _, err := os.Lstat(missing); return err == nil }) {
		t.Fatal("a file made outside in an unwatched directory did not show within 5 s")
	}
	// So does a change of its mode.
	if err := os.Chmod(outside, 0o600); err != nil {
		t.Fatal(err)
	}
	if !testfuse.WaitFor(5*time.Second, func() bool {
		fi, err := os.Lstat(missing)
		return err == nil && fi.Mode().Perm() == 0o600
	}) {
		t.Fatal("a mode changed outside in an unwatched directory did not show within 5 s")
	}
}
