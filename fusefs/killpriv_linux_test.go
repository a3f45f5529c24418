package fusefs

import (
	"encoding/binary"
	"errors"
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
		{"write by the owner", ownedByNobody | 0o6755, false, appendTo},
		{"write by the owner, no group execute", ownedByNobody | 0o6745, false, appendTo},
		{"truncate by another user", 0o6777, false, func(p string) error { return unix.Truncate(p, 0) }},
		{"truncate by the owner", ownedByNobody | 0o6755, false, func(p string) error { return unix.Truncate(p, 0) }},
		{"truncate by root", 0o6777, true, func(p string) error { return unix.Truncate(p, 0) }},
		{"open with O_TRUNC by another user", 0o6777, false, func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				return err
			}
			return f.Close()
		}},
		{"ftruncate by another user", 0o6777, false, func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(1)
		}},
		{"chown by root", 0o6755, true, func(p string) error { return unix.Chown(p, nobody, nobody) }},
		{"chown by root, no group execute", 0o6745, true, func(p string) error { return unix.Chown(p, nobody, nobody) }},
		{"chown by the owner to the same owner", ownedByNobody | 0o6755, false, func(p string) error { return unix.Chown(p, nobody, nobody) }},
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

// ownedByNobody, in a mode given to afterSetIDOp, makes the file nobody's.
const ownedByNobody = 1 << 31

// afterSetIDOp makes dir/setid root's (nobody's with ownedByNobody) with
// mode, runs op on it (as nobody unless asRoot) and returns its mode as stat
// reports it then.
func (m *mounted) afterSetIDOp(t *testing.T, dir string, mode uint32, asRoot bool, op func(string) error) uint32 {
	t.Helper()
	p := filepath.Join(dir, "setid")
	os.Remove(p)
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if mode&ownedByNobody != 0 {
		if err := unix.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Chmod(p, mode&0o7777); err != nil {
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

// A file capability (security.capability) goes with a write or a
// truncation, by anyone, and with a chown, natively: the VFS asks for it
// before the first write after the attributes were fetched and before
// every chown, and removes it with a REMOVEXATTR. The mount must leave the
// backing file as ext4 leaves the same file natively.
func TestFileCapabilitiesGoAsTheKernelWould(t *testing.T) {
	m := mountShared(t)
	native := t.TempDir()
	if err := os.Chmod(native, 0o777); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(native, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(probe, "security.capability", netBindService(), 0); errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("the filesystem of %s keeps no file capabilities: %v", native, err)
	} else if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		asRoot bool
		op     func(p string) error
	}{
		{"write by another user", false, appendTo},
		{"write by root", true, appendTo},
		{"truncate by another user", false, func(p string) error { return unix.Truncate(p, 0) }},
		{"chown by root", true, func(p string) error { return unix.Chown(p, nobody, nobody) }},
		{"chmod by root", true, func(p string) error { return unix.Chmod(p, 0o755) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := afterCapabilityOp(t, filepath.Join(m.mnt, "pub"), tc.asRoot, tc.op)
			want := afterCapabilityOp(t, native, tc.asRoot, tc.op)
			if got != want {
				t.Errorf("capability kept through the mount: %v, natively: %v", got, want)
			}
			if kept := hasCapability(t, filepath.Join(m.backing, "pub", "capable")); kept != want {
				t.Errorf("backing file's capability kept: %v, natively: %v", kept, want)
			}
		})
	}
}

// afterCapabilityOp makes dir/capable a root file of mode 0777 with a file
// capability, runs op on it (as nobody unless asRoot) and reports whether
// the capability is still there.
func afterCapabilityOp(t *testing.T, dir string, asRoot bool, op func(string) error) bool {
	t.Helper()
	p := filepath.Join(dir, "capable")
	os.Remove(p)
	if err := os.WriteFile(p, []byte("x"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(p, "security.capability", netBindService(), 0); err != nil {
		t.Fatalf("set security.capability on %s: %v", p, err)
	}
	if !hasCapability(t, p) {
		t.Fatalf("%s: security.capability not set", p)
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
	return hasCapability(t, p)
}

// netBindService is a version 2 file capability (struct vfs_cap_data)
// granting CAP_NET_BIND_SERVICE, permitted and effective.
func netBindService() []byte {
	const revision2, effective = 0x02000000, 0x1
	words := []uint32{revision2 | effective, 1 << unix.CAP_NET_BIND_SERVICE, 0, 0, 0}
	b := make([]byte, 0, 4*len(words))
	for _, w := range words {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	return b
}

func hasCapability(t *testing.T, p string) bool {
	t.Helper()
	_, err := unix.Getxattr(p, "security.capability", nil)
	if err != nil && !errors.Is(err, unix.ENODATA) {
		t.Fatalf("get security.capability of %s: %v", p, err)
	}
	return err == nil
}
