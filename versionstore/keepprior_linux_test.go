package versionstore

import (
	"encoding/hex"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// fullStateStore is a store whose state directory is on a small tmpfs,
// with the workspace elsewhere.
func fullStateStore(t *testing.T) (*testStore, string) {
	state := mountTmpfs(t, "1m")
	ts := &testStore{t: t, dir: t.TempDir(), index: filepath.Join(state, "index.db")}
	ts.open()
	t.Cleanup(func() { ts.Close() })
	return ts, state
}

// noise is n bytes of hex text that does not compress much: keeping it
// needs new pages in the index.
func noise(seed byte, n int) string {
	b := make([]byte, n/2)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return hex.EncodeToString(b)
}

// wantPriorSafe fails if a tool's change over prior, an outside change the
// store had not kept, reported success while prior's bytes are not kept, or
// failed after replacing the file.
func wantPriorSafe(t *testing.T, ts *testStore, rel, prior string, err error) {
	t.Helper()
	if err != nil {
		if got := ts.get(rel); got != prior {
			t.Fatalf("failed (%v), but the file was replaced: %d bytes", err, len(got))
		}
		return
	}
	if _, oerr := ts.Object(SumString(prior)); oerr != nil {
		t.Fatalf("succeeded, but the bytes it replaced are lost: %v", oerr)
	}
}

// A tool write or edit over an outside change keeps the bytes it replaces
// before it publishes: with the state directory's disk full, it fails with
// the file unchanged instead of reporting success over lost bytes. (They
// rode the write's own commit, whose failure was logged only.)
func TestToolChangeOnFullStateDiskKeepsPrior(t *testing.T) {
	ts, state := fullStateStore(t)
	ts.put("w.txt", "one\n")
	ts.put("e.txt", "one\n")
	ts.version("w.txt")
	ts.version("e.txt")
	fill(t, state)
	wprior, eprior := noise(1, 600<<10), noise(2, 600<<10)
	ts.put("w.txt", wprior)
	ts.put("e.txt", eprior)

	_, err := ts.write("w.txt", "two\n", Intent{})
	if err != nil {
		wantErr(t, err, ReasonIndex, "write", "/ws/w.txt")
	}
	wantPriorSafe(t, ts, "w.txt", wprior, err)
	_, err = ts.edit("e.txt", Edit{Old: eprior[:64], New: "two"}, nil)
	if err != nil {
		wantErr(t, err, ReasonIndex, "", "/ws/e.txt")
	}
	wantPriorSafe(t, ts, "e.txt", eprior, err)
}

// A tool write whose own version the index cannot record says so (an index
// error) instead of reporting success. (The commit's failure was logged
// only.)
func TestToolWriteReportsIndexFailure(t *testing.T) {
	ts, state := fullStateStore(t)
	ts.put("f.txt", "one\n")
	ts.version("f.txt")
	fill(t, state)
	content := noise(3, 600<<10)
	_, err := ts.write("f.txt", content, Intent{})
	wantErr(t, err, ReasonIndex, "write", "/ws/f.txt")
	if _, err := ts.Object(SumString("one\n")); err != nil {
		t.Fatalf("the bytes replaced are lost: %v", err)
	}
}
