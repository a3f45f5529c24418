package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A directory still open when a rename replaced it, or when it was
// removed, answered fstat with ENOENT: its attributes were looked up by a
// name it no longer has. Natively the open descriptor still stats, with no
// links left (xfstests generic/035).
func TestStatOfAnOpenDirectoryAfterItIsRemoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(victim string) error
	}{
		{"rename-over", func(victim string) error {
			src := filepath.Join(filepath.Dir(victim), "src")
			if err := os.Mkdir(src, 0o755); err != nil {
				return err
			}
			return unix.Rename(src, victim) // os.Rename refuses an existing directory
		}},
		{"rmdir", os.Remove},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mountT(t)
			victim := filepath.Join(m.mnt, "victim")
			if err := os.Mkdir(victim, 0o750); err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Open(victim, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := tc.remove(victim); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				t.Fatalf("fstat of the open directory after %s: %v", tc.name, err)
			}
			if st.Nlink != 0 || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o777 != 0o750 {
				t.Errorf("fstat after %s: nlink %d mode %o, want nlink 0 mode dir 750", tc.name, st.Nlink, st.Mode)
			}
		})
	}
}
