package fusefs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// A 4 KiB write at offset (2^32 - 2) * 4 KiB, as xfstests' generic/308
// makes, leaves a sparse file of 16 TiB. Its version is committed at once,
// from its stat: hashing it read 16 TiB of holes, for hours, and the
// daemon could not be unmounted meanwhile.
func TestHugeSparseWriteIsCommittedWithoutReadingItsHoles(t *testing.T) {
	m := mountT(t)
	p := filepath.Join(m.mnt, "huge")
	const off = (1<<32 - 2) * 4096
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 4096), off); err != nil {
		f.Close()
		t.Skipf("the backing filesystem takes no 16 TiB file: %v", err)
	}
	start := time.Now()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var h []versionstore.HistoryEntry
	committed := testfuse.WaitFor(30*time.Second, func() bool {
		h, err = m.store.History("huge")
		return err == nil && len(h) > 0 && h[0].Size == off+4096
	})
	if !committed {
		t.Fatalf("no version of the 16 TiB file 30 s after its close (history %+v, %v)", h, err)
	}
	t.Logf("committed %v after the close", time.Since(start))
	if h[0].NotKept != versionstore.NotKeptUnhashed {
		t.Errorf("the version's bytes are not kept because %q, want %q", h[0].NotKept, versionstore.NotKeptUnhashed)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(m.backing, "huge"), &st); err != nil || st.Blocks > 1024 {
		t.Errorf("the backing file is not sparse: %d blocks, %v", st.Blocks, err)
	}
}
