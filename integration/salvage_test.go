package integration

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/testfuse"
	"golang.org/x/sys/unix"
)

// A damaged index found at the start is salvaged, and `dshfs status` says
// so in words: what was copied and lost, where the damaged file is kept,
// and from when history may be missing. The index is one of versionstore's
// damaged testdata: a power cut left its newest commit's root page torn,
// and no journal entry readable.
func TestStatusReportsSalvagedIndex(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), filepath.Join(t.TempDir(), "state")
	for _, d := range []string{mnt, state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeGunzipped(t, "../versionstore/testdata/damaged/powercut-s0-c617.db.gz", filepath.Join(state, "index.db"))
	t.Cleanup(func() {
		dshfs(t, t.TempDir(), "unmount", mnt)
		unix.Unmount(mnt, mntDetach)
	})
	if out, code := dshfs(t, t.TempDir(), "mount", "--state", state, backing, mnt); code != 0 {
		t.Fatalf("mount on a damaged index: exit %d\n%s", code, out)
	}
	kept, _ := filepath.Glob(filepath.Join(state, "index.db.damaged-*"))
	if len(kept) != 1 {
		t.Fatalf("the damaged index is not kept beside the new one: %v", kept)
	}
	out, code := dshfs(t, t.TempDir(), "status", mnt)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		mnt + ": the index was damaged and salvaged at ",
		"50 pages of it could not be read",
		"106 history, 13 checkpoints, 2 meta, 2 unsettled and 1 files entries were copied",
		"the damaged index is kept in " + kept[0],
		"no change in its journal could be read: history may miss any change before the salvage",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0001-01-01") {
		t.Errorf("status gives a zero time:\n%s", out)
	}
}

// writeGunzipped decompresses the file at from into to.
func writeGunzipped(t *testing.T, from, to string) {
	t.Helper()
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
