package fusefs

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// opcodes counts the FUSE requests a mount receives, by opcode.
type opcodes struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *opcodes) Write(p []byte) (int, error) {
	// go-fuse's debug lines for requests read "rx 12: OPENDIR n3 ...".
	if _, rest, ok := strings.Cut(string(p), "rx "); ok {
		if _, op, ok := strings.Cut(rest, ": "); ok {
			op, _, _ = strings.Cut(op, " ")
			c.mu.Lock()
			c.n[op]++
			c.mu.Unlock()
		}
	}
	return len(p), nil
}

func (c *opcodes) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func listNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names
}

// TestDirectoryListings: directories are opened without OPENDIR round
// trips, listings spanning many READDIRPLUS requests are complete, and
// changes through the mount and behind its back show in the next listing.
func TestDirectoryListings(t *testing.T) {
	ops := &opcodes{n: map[string]int{}}
	m := mountT(t, func(o *Options) { o.Debug, o.DebugLog = true, log.New(ops, "", 0) })
	big := filepath.Join(m.backing, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 1500 { // about 60 READDIRPLUS replies
		name := fmt.Sprintf("%04d-%s", i, strings.Repeat("n", 100))
		want = append(want, name)
		if err := os.WriteFile(filepath.Join(big, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(m.mnt, "big")
	if got := listNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("listing through the mount has %d names, want %d", len(got), len(want))
	}
	if n := ops.take(); n["READDIRPLUS"] < 10 {
		t.Fatalf("the first listing took %d READDIRPLUS requests; the test needs a listing of many", n["READDIRPLUS"])
	}
	// The watcher may still be handling the events of the 1,500 files made
	// behind the mount's back, each of which rightly drops the cached
	// listing (seen under load in CI): warm listings must come to send no
	// request at all once it has caught up.
	var last map[string]int
	warm := testfuse.WaitFor(10*time.Second, func() bool {
		ops.take()
		for range 3 {
			if got := listNames(t, dir); !slices.Equal(got, want) {
				t.Fatalf("cached listing differs: %d names", len(got))
			}
		}
		last = ops.take()
		return last["OPENDIR"]+last["RELEASEDIR"]+last["READDIRPLUS"]+last["READDIR"] == 0
	})
	if !warm {
		t.Errorf("warm listings still sent requests after 10 s: %v", last)
	}

	// A change through the mount, and one behind its back.
	if err := os.WriteFile(filepath.Join(dir, "zz-through"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, dir); !slices.Contains(got, "zz-through") || len(got) != len(want)+1 {
		t.Fatalf("a file created through the mount is not listed (%d names)", len(got))
	}
	if err := os.Remove(filepath.Join(big, want[0])); err != nil {
		t.Fatal(err)
	}
	if !testfuse.WaitFor(5*time.Second, func() bool {
		got := listNames(t, dir)
		return !slices.Contains(got, want[0]) && len(got) == len(want)
	}) {
		t.Fatalf("a name removed from the backing directory is still listed after 5 s")
	}
}

// A change behind the mount's back while the kernel is part-way through
// caching a listing must not leave the directory uncached for good: the
// kernel adds to a listing it caches only at the end of what it has, and
// never starts over on a listing it has not finished, so dropping the
// pages it has filled, mid-fill, would make every later listing go to the
// daemon again. The listing that follows shows the change, and the next
// ones come from the cache.
func TestListingCachedAfterAChangeMidListing(t *testing.T) {
	ops := &opcodes{n: map[string]int{}}
	m := mountT(t, func(o *Options) { o.Debug, o.DebugLog = true, log.New(ops, "", 0) })
	dir := filepath.Join(m.mnt, "big")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 500 { // about 20 READDIRPLUS replies
		want = append(want, fmt.Sprintf("%04d-%s", i, strings.Repeat("n", 100)))
		if err := os.WriteFile(filepath.Join(dir, want[i]), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An old mtime, so that the change's differs from it however coarse
	// the backing filesystem's timestamps.
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadDir(10); err != nil { // one getdents: the kernel caches its first pages
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.backing, "big", "zz-behind"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The watcher's invalidation shows as the directory's new mtime.
	if !testfuse.WaitFor(10*time.Second, func() bool {
		st, err := os.Stat(dir)
		return err == nil && !st.ModTime().Equal(old)
	}) {
		t.Fatal("the mount does not show the directory's new mtime after 10 s")
	}
	if _, err := f.ReadDir(-1); err != nil { // the rest of the listing the kernel was caching
		t.Fatal(err)
	}
	want = append(want, "zz-behind")
	if got := listNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("listing after the change has %d names, want %d", len(got), len(want))
	}
	var last map[string]int
	cached := testfuse.WaitFor(10*time.Second, func() bool {
		ops.take()
		if got := listNames(t, dir); !slices.Equal(got, want) {
			t.Fatalf("listing differs: %d names", len(got))
		}
		last = ops.take()
		return last["READDIRPLUS"]+last["READDIR"] == 0
	})
	if !cached {
		t.Errorf("listings still sent requests after 10 s: %v", last)
	}
}
