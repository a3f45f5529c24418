package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/internal/testfuse"
	"golang.org/x/sys/unix"
)

// The mount negotiates HANDLE_KILLPRIV_V2, so the kernel leaves the
// clearing of set-id bits to the daemon — which, as root with CAP_FSETID,
// never has them cleared by the backing filesystem. Every case is compared
// with what ext4 does to the same file natively, in passthrough mode and
// not (make test runs the package both ways).
func TestSetIDBitsAreClearedAsTheKernelWould(t *testing.T) {
	m := mountShared(t)
	native := t.TempDir()
	if err := os.Chmod(native, 0o777); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mode   uint32
		asRoot bool
		op     func(p string) error
	}{
		{"write by another user", 0o6777, false, appendTo},
		{"write by another user, no group execute", 0o6767, false, appendTo},
		{"write by root", 0o6777, true, appendTo},
		{"truncate by another user", 0o6777, false, func(p string) error { return unix.Truncate(p, 0) }},
		{"truncate by root", 0o6777, true, func(p string) error { return unix.Truncate(p, 0) }},
		{"ftruncate by another user", 0o6777, false, func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(1)
		}},
		{"chown by root", 0o6755, true, func(p string) error { return unix.Chown(p, nobody, nobody) }},
		{"chmod by root", 0o6755, true, func(p string) error { return unix.Chmod(p, 0o6750) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := m.afterSetIDOp(t, filepath.Join(m.mnt, "pub"), tc.mode, tc.asRoot, tc.op)
			want := m.afterSetIDOp(t, native, tc.mode, tc.asRoot, tc.op)
			if got != want {
				t.Errorf("mode through the mount %04o, natively %04o (from %04o)", got, want, tc.mode)
			}
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(m.backing, "pub", "setid"), &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&0o7777 != want {
				t.Errorf("backing file's mode %04o, natively %04o", st.Mode&0o7777, want)
			}
		})
	}
}

// afterSetIDOp makes dir/setid root's with mode, runs op on it (as nobody
// unless asRoot) and returns its mode as stat reports it then.
func (m *mounted) afterSetIDOp(t *testing.T, dir string, mode uint32, asRoot bool, op func(string) error) uint32 {
	t.Helper()
	p := filepath.Join(dir, "setid")
	os.Remove(p)
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	var err error
	if asRoot {
		err = op(p)
	} else {
		asNobody(t, func() { err = op(p) })
	}
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

func appendTo(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("more"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// chown(path, -1, -1) changes nothing but the inode's ctime, natively; the
// kernel sends it as a SETATTR that sets nothing.
func TestChownToTheSameOwnerMovesCtime(t *testing.T) {
	m := mountT(t)
	p := filepath.Join(m.mnt, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after unix.Stat_t
	if err := unix.Stat(p, &before); err != nil {
		t.Fatal(err)
	}
	testfuse.ClockPast(t, p)
	if err := unix.Chown(p, -1, -1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(p, &after); err != nil {
		t.Fatal(err)
	}
	if after.Ctim == before.Ctim {
		t.Fatalf("ctime %v unchanged by chown(-1, -1)", after.Ctim)
	}
}
