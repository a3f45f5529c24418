package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// unsettled reports whether the index holds a record of a tool publish of
// rel not yet settled (versionstore's settle.go).
func (m *mounted) unsettled(rel string) bool {
	m.t.Helper()
	found := false
	err := m.store.DB().View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("unsettled")); b != nil {
			found = b.Get([]byte(rel)) != nil
		}
		return nil
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return found
}

// A change through the mount to a file a tool has just published — or to
// a directory above it — first settles the publish and drops its record
// durably: a power cut after the change must never put the tool's bytes
// back over it.
func TestMountChangesSettleToolPublishes(t *testing.T) {
	changes := map[string]func(m *mounted) error{
		"write":         func(m *mounted) error { return os.WriteFile(filepath.Join(m.mnt, "d/f"), nil, 0o644) },
		"truncate":      func(m *mounted) error { return os.Truncate(filepath.Join(m.mnt, "d/f"), 0) },
		"unlink":        func(m *mounted) error { return os.Remove(filepath.Join(m.mnt, "d/f")) },
		"rename":        func(m *mounted) error { return os.Rename(filepath.Join(m.mnt, "d/f"), filepath.Join(m.mnt, "d/g")) },
		"rename parent": func(m *mounted) error { return os.Rename(filepath.Join(m.mnt, "d"), filepath.Join(m.mnt, "e")) },
		"replace": func(m *mounted) error {
			os.WriteFile(filepath.Join(m.mnt, "other"), []byte("other\n"), 0o644)
			return os.Rename(filepath.Join(m.mnt, "other"), filepath.Join(m.mnt, "d/f"))
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			// The file is there before the mount: put there after, the
			// watcher's late record of it (a commit) would settle the
			// tool's publish before the test looks.
			m := mountWith(t, func(backing string) {
				os.Mkdir(filepath.Join(backing, "d"), 0o755)
				os.WriteFile(filepath.Join(backing, "d/f"), []byte("old\n"), 0o644)
			})
			m.seeFile("d/f")
			if err := m.toolWrite("d/f", "the tool's\n"); err != nil {
				t.Fatal(err)
			}
			if !m.unsettled("d/f") {
				t.Fatal("no unsettled record right after the tool's write")
			}
			if err := change(m); err != nil {
				t.Fatal(err)
			}
			if m.unsettled("d/f") {
				t.Fatalf("the record of the tool's write outlived a %s through the mount", name)
			}
		})
	}
}
