package versionstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The index and the objects directory are never reached through a symbolic
// link: one left in the state directory by another user pointed bbolt at a
// file of the daemon's user, which an empty file turns into an index (16 KiB
// written over it), and object files would be written wherever objects/
// pointed.
func TestStateFilesAreNotLinks(t *testing.T) {
	for _, name := range []string{"index.db", "objects"} {
		t.Run(name, func(t *testing.T) {
			state, victim := t.TempDir(), t.TempDir()
			target := filepath.Join(victim, "empty")
			if name == "objects" {
				target = victim
			} else {
				must(t, os.WriteFile(target, nil, 0o600))
			}
			must(t, os.Symlink(target, filepath.Join(state, name)))
			s, err := Open(t.TempDir(), filepath.Join(state, "index.db"), Options{})
			if err == nil {
				s.Close()
				t.Fatalf("opened a store whose %s is a symbolic link", name)
			}
			if !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("error %q does not say why", err)
			}
			if fi, err := os.Stat(filepath.Join(victim, "empty")); name == "index.db" && (err != nil || fi.Size() != 0) {
				t.Errorf("the linked file was written: %v %v", fi.Size(), err)
			}
		})
	}
}
