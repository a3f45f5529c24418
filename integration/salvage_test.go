package integration

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/dshfs/dshfs/internal/testfuse"
	"golang.org/x/sys/unix"
)

// A damaged index found at the start is salvaged, and `dshfs status` says
// so in words: what was copied and lost, where the damaged file is kept,
// and from when history may be missing. The index is one of versionstore's
// damaged testdata: an index of 80 files whose history's root branch page
// points to itself.
func TestStatusReportsSalvagedIndex(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), filepath.Join(t.TempDir(), "state")
	for _, d := range []string{mnt, state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeGunzipped(t, "../versionstore/testdata/damaged/branch-cycle.db.gz", filepath.Join(state, "index.db"))
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
	want := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(mnt) + ": the index was damaged and salvaged at [0-9-]+ [0-9:]+: " +
		"1 page of it could not be read; 80 files, 80 journal, 72 history, 40 objects, [0-9]+ unsettled and 1 meta entries were copied; " +
		"the damaged index is kept in " + regexp.QuoteMeta(kept[0]) + "; history may miss changes after [0-9-]+ [0-9:]+$")
	if !want.MatchString(out) {
		t.Errorf("status does not say what the salvage lost and kept, and where:\n%s\nwant a line matching %s", out, want)
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
