// Regression tests of a mount shared with other users (allow_other), the
// daemon running as root: each comment says what used to go wrong.

package fusefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Create opened the backing name as root with O_CREAT but not O_EXCL and
// gave the file to the caller. The kernel sends CREATE whenever it trusts a
// negative entry for the name, and a file created straight in the backing
// directory within the watcher's 100 ms of a change through the mount to
// the same name leaves that entry in place: any user's open(O_CREAT) then
// opened root's 0600 file, read it, and made it theirs; with O_TRUNC it
// emptied it.
func TestCreateNeverTakesOverAnotherUsersFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags int
	}{
		{"rdwr", os.O_RDWR | os.O_CREATE},
		{"trunc", os.O_RDWR | os.O_CREATE | os.O_TRUNC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mountShared(t)
			for try := range 100 {
				rel := fmt.Sprintf("pub/x%d", try)
				m.staleAbsent(rel)
				e := m.putSecret(rel) // within the window: the kernel still believes rel absent
				var got string
				var err error
				asNobody(t, func() { got, err = openAndRead(filepath.Join(m.mnt, rel), tc.flags) })
				m.wantIntact(rel, e)
				if err == nil {
					t.Fatalf("try %d: nobody opened root's file and read %q", try, got)
				}
				if !errors.Is(err, fs.ErrPermission) {
					t.Fatalf("try %d: %v, want permission denied", try, err)
				}
			}
		})
	}
}

// The other side of the fix above: a file created behind a stale negative
// entry is opened, as a lookup would have found it, for a caller its mode
// allows (the kernel retries the open after Create answers ESTALE); with
// O_EXCL the open fails as the file exists.
func TestCreateOverAStaleNegativeEntryOpensTheFile(t *testing.T) {
	m := mountShared(t)
	for i, tc := range []struct {
		flags int
		want  string
		err   error
	}{
		{os.O_RDWR | os.O_CREATE, "hello\n", nil},
		{os.O_WRONLY | os.O_CREATE | os.O_TRUNC, "", nil},
		{os.O_RDWR | os.O_CREATE | os.O_EXCL, "", fs.ErrExist},
	} {
		rel := fmt.Sprintf("pub/y%d", i)
		m.staleAbsent(rel)
		p := filepath.Join(m.backing, rel)
		if err := os.WriteFile(p, []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		var err error
		asNobody(t, func() {
			var f *os.File
			if f, err = os.OpenFile(filepath.Join(m.mnt, rel), tc.flags, 0o644); err == nil {
				err = f.Close()
			}
		})
		if !errors.Is(err, tc.err) {
			t.Fatalf("flags %#x: open: %v, want %v", tc.flags, err, tc.err)
		}
		want := tc.want
		if tc.err != nil {
			want = "hello\n"
		}
		if got, _ := m.getBacking(rel); got != want {
			t.Fatalf("flags %#x: the file holds %q, want %q", tc.flags, got, want)
		}
	}
}
