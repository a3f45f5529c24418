// Create on a mount shared with other users (allow_other), the daemon
// running as root: the caller gets only what it may, and only a new entry
// is given to its creator.

package fusefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/internal/testfuse"
	"golang.org/x/sys/unix"
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

// Mkdir, mknod and symlink gave the new entry to the caller by name
// (fchownat): whatever the name held by then was made theirs — here root's
// directory or file, moved there straight in the backing directory in the
// instant after the daemon made the entry. (Root's entry is made some
// clock ticks before: one born in the same tick as the new entry cannot be
// told from it by its birth time.)
func TestOnlyTheNewEntryIsGivenToItsCreator(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rootDir bool // root's entry moved in is a directory
		make    func(p string) error
	}{
		{"mkdir", true, func(p string) error { return os.Mkdir(p, 0o755) }},
		{"mkfifo", false, func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"symlink", false, func(p string) error { return os.Symlink("target", p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var once sync.Once
			m := mountShared(t, func(o *Options) {
				o.afterMake = func(dirfd int, name string) {
					once.Do(func() { unix.Renameat(dirfd, name+".root", dirfd, name) })
				}
			})
			e := m.rootsOwn("pub/n.root", tc.rootDir)
			testfuse.ClockPast(t, filepath.Join(m.backing, "pub/n.root")) // what the daemon makes is born later
			var err error
			asNobody(t, func() { err = tc.make(filepath.Join(m.mnt, "pub/n")) })
			m.wantIntact("pub/n", e)
			if !errors.Is(err, fs.ErrExist) {
				t.Fatalf("%s as nobody: %v, want the name taken (EEXIST)", tc.name, err)
			}
		})
	}
}

// New entries were given the caller's group everywhere. In a
// set-group-ID directory they take the directory's group, and a new
// directory its set-group-ID bit, as they do natively: a group's shared
// directory stayed readable only by the creator's own group.
func TestNewEntriesInASetgidDirectoryTakeItsGroup(t *testing.T) {
	const group = 4242
	m := mountShared(t)
	for _, d := range []string{"grp", "grp-native"} {
		p := filepath.Join(m.backing, d)
		if err := os.Mkdir(p, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 0, group); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o777|os.ModeSetgid); err != nil {
			t.Fatal(err)
		}
	}
	makeAll := func(dir string) error {
		return errors.Join(
			os.WriteFile(filepath.Join(dir, "f"), nil, 0o644),
			os.Mkdir(filepath.Join(dir, "d"), 0o755),
			syscall.Mkfifo(filepath.Join(dir, "p"), 0o644),
			os.Symlink("f", filepath.Join(dir, "l")))
	}
	var err, nerr error
	asNobody(t, func() {
		err = makeAll(filepath.Join(m.mnt, "grp"))
		nerr = makeAll(filepath.Join(m.backing, "grp-native"))
	})
	if err != nil || nerr != nil {
		t.Fatalf("make as nobody: %v; natively: %v", err, nerr)
	}
	for _, name := range []string{"f", "d", "p", "l"} {
		var st, nst unix.Stat_t
		if err := unix.Lstat(filepath.Join(m.backing, "grp", name), &st); err != nil {
			t.Fatal(err)
		}
		if err := unix.Lstat(filepath.Join(m.backing, "grp-native", name), &nst); err != nil {
			t.Fatal(err)
		}
		if st.Uid != nobody || st.Gid != group || st.Mode != nst.Mode || st.Gid != nst.Gid {
			t.Errorf("%s made through the mount: uid %d gid %d mode %o; natively uid %d gid %d mode %o",
				name, st.Uid, st.Gid, st.Mode, nst.Uid, nst.Gid, nst.Mode)
		}
	}
}
