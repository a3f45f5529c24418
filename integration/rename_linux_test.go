package integration

import (
	"testing"

	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// RENAME_EXCHANGE swaps two files: each name's history records the bytes it
// now holds.
func TestRenameExchange(t *testing.T) {
	w := mountWorkspace(t)
	w.sh("printf A > a && printf B > b")
	w.read("agent", "a")
	if err := unix.Renameat2(unix.AT_FDCWD, w.path("a"), unix.AT_FDCWD, w.path("b"), unix.RENAME_EXCHANGE); err != nil {
		t.Fatal(err)
	}
	// With kernel passthrough b's version is committed by its release,
	// which may come after the exchange: it then lands at a, where b is.
	if w.indexVersionBecomes("a", versionstore.SumString("B")) != versionstore.SumString("B") || w.indexVersion("b") != versionstore.SumString("A") {
		t.Fatal("the index did not follow the exchange")
	}
	wantCode(t, w.edit("agent", "a", "B", "C"), versionstore.CodeStaleVersion)
	if err := unix.Renameat2(unix.AT_FDCWD, w.path("a"), unix.AT_FDCWD, w.path("b"), unix.RENAME_NOREPLACE); err != unix.EEXIST {
		t.Fatalf("RENAME_NOREPLACE over an existing file: %v", err)
	}
}
