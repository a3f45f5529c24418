package fusefs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A dirty mark no file being written maps to (left, say, by a writer that
// closed while its directory was renamed) is settled after two checks;
// the mark of a file still open for writing is not.
func TestStaleDirtyMarkIsSettled(t *testing.T) {
	old := staleMarkAge
	staleMarkAge = 100 * time.Millisecond
	t.Cleanup(func() { staleMarkAge = old })
	m := mountT(t)
	if err := os.WriteFile(filepath.Join(m.backing, "orphan"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(m.mnt, "open"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("being written\n")
	unlock := m.store.Locks().Lock("orphan")
	m.store.MarkDirty("orphan") // no node is writing it
	unlock()

	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := m.store.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Dirty == 1 {
			break // only the open file's mark is left
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dirty marks after 5 s, want only the open file's", st.Dirty)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // several more checks
	if st, _ := m.store.Stats(); st.Dirty != 1 {
		t.Fatalf("the mark of a file still being written was settled (%d marks)", st.Dirty)
	}
	if h, _ := m.store.History("orphan"); len(h) != 1 || h[0].Writer.Kind != "mount" {
		t.Fatalf("orphan's history %+v: the settled mark should commit its bytes", h)
	}
}
