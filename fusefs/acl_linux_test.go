package fusefs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"golang.org/x/sys/unix"
)

const (
	aclAccess  = "system.posix_acl_access"
	aclDefault = "system.posix_acl_default"
)

// aclEntry is one entry of a POSIX ACL: a tag (ACL_USER_OBJ 0x01, ACL_USER
// 0x02, ACL_GROUP_OBJ 0x04, ACL_GROUP 0x08, ACL_MASK 0x10, ACL_OTHER 0x20),
// its permission bits and, for a named user or group, its id.
type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// aclXattr encodes entries, sorted by tag then id, as Linux stores an ACL
// in its system.posix_acl_* attributes (version 2, little-endian), which is
// what setfacl(1) writes.
func aclXattr(entries ...aclEntry) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint32(2))
	for _, e := range entries {
		if e.tag != 0x02 && e.tag != 0x08 {
			e.id = ^uint32(0) // ACL_UNDEFINED_ID
		}
		binary.Write(&b, binary.LittleEndian, e)
	}
	return b.Bytes()
}

// denyNobody is the ACL of a 0644 file that denies nobody by name:
// user::rw-, user:nobody:---, group::r--, mask::r--, other::r--.
var denyNobody = aclXattr(aclEntry{0x01, 6, 0}, aclEntry{0x02, 0, nobody}, aclEntry{0x04, 4, 0}, aclEntry{0x10, 4, 0}, aclEntry{0x20, 4, 0})

// needACLs skips the test where the backing filesystem keeps no ACLs.
func needACLs(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, ".acl-probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(probe)
	err := unix.Setxattr(probe, aclAccess, aclXattr(aclEntry{0x01, 6, 0}, aclEntry{0x04, 4, 0}, aclEntry{0x20, 4, 0}), 0)
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Skip("the backing filesystem keeps no POSIX ACLs")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// An ACL entry that denies a user is enforced through the mount as the
// backing filesystem enforces it: the kernel checked the mode bits alone,
// and nobody, denied by name, read a file its ACL keeps from them.
func TestACLDeniesANamedUser(t *testing.T) {
	m := mountShared(t)
	needACLs(t, m.backing)
	p := filepath.Join(m.mnt, "pub", "secret")
	if err := os.WriteFile(p, []byte("not for nobody"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(p, aclAccess, denyNobody, 0); err != nil {
		t.Fatal(err)
	}
	var native, mounted error
	asNobody(t, func() {
		_, native = os.ReadFile(filepath.Join(m.backing, "pub", "secret"))
		_, mounted = os.ReadFile(p)
	})
	if !errors.Is(native, os.ErrPermission) {
		t.Fatalf("nobody reads the backing file: %v, want permission denied", native)
	}
	if !errors.Is(mounted, os.ErrPermission) {
		t.Errorf("nobody reads the file through the mount: %v, want permission denied (its ACL denies them)", mounted)
	}
}

// onThreadUmask runs fn on an OS thread of its own whose umask, alone, is
// umask (the thread stops sharing the process's filesystem context).
func onThreadUmask(t *testing.T, umask int, fn func()) {
	t.Helper()
	onThread(t, func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return err
		}
		unix.Umask(umask)
		return nil
	}, fn)
}

// A new file or directory gets its mode and ACL through the mount as the
// backing filesystem gives them natively: a parent's default ACL (group::rwx)
// is inherited whole, whatever the creator's umask, which applies only
// where the parent has no default ACL; in a set-group-ID directory the new
// directory keeps the bit and the group.
func TestCreateInheritsDefaultACLs(t *testing.T) {
	m := mountT(t)
	needACLs(t, m.backing)
	native := t.TempDir()
	inherit := aclXattr(aclEntry{0x01, 7, 0}, aclEntry{0x02, 7, nobody}, aclEntry{0x04, 7, 0}, aclEntry{0x10, 7, 0}, aclEntry{0x20, 5, 0})
	parents := []struct {
		name string
		mode uint32
		acl  []byte
	}{
		{"plain", 0o777, nil},
		{"default", 0o777, inherit},
		{"setgid", 0o2775, inherit},
	}
	for _, root := range []string{m.mnt, native} {
		for _, p := range parents {
			dir := filepath.Join(root, p.name)
			mustMakeParent(t, dir, p.mode, p.acl)
		}
	}
	for _, p := range parents {
		for _, child := range []string{"file", "dir"} {
			got := bornThere(t, filepath.Join(m.mnt, p.name), child)
			want := bornThere(t, filepath.Join(native, p.name), child)
			if got != want {
				t.Errorf("%s in %s: through the mount %s, natively %s", child, p.name, got, want)
			}
		}
	}
}

// mustMakeParent makes dir with mode (group nobody's), and the default ACL
// acl if it is not nil.
func mustMakeParent(t *testing.T, dir string, mode uint32, acl []byte) {
	t.Helper()
	errs := []error{os.Mkdir(dir, 0o777), os.Chown(dir, 0, nobody), unix.Chmod(dir, mode)}
	if acl != nil {
		errs = append(errs, unix.Setxattr(dir, aclDefault, acl, 0))
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// bornThere makes a file (mode 0666) or directory (0777) named kind in
// dir, under umask 022, and describes its mode, group and ACLs.
func bornThere(t *testing.T, dir, kind string) string {
	t.Helper()
	p := filepath.Join(dir, kind)
	var err error
	onThreadUmask(t, 0o022, func() {
		if kind == "dir" {
			err = unix.Mkdir(p, 0o777)
			return
		}
		var fd int
		if fd, err = unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o666); err == nil {
			unix.Close(fd)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return describeMode(st) + " access " + xattrHex(p, aclAccess) + " default " + xattrHex(p, aclDefault)
}

func describeMode(st unix.Stat_t) string {
	return fmt.Sprintf("mode %04o gid %d", st.Mode&0o7777, st.Gid)
}

// xattrHex is attribute attr of p in hex, or "none".
func xattrHex(p, attr string) string {
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(p, attr, buf)
	switch {
	case errors.Is(err, syscall.ENODATA):
		return "none"
	case err != nil:
		return "error " + err.Error()
	}
	return hex.EncodeToString(buf[:n])
}

// An ACL set straight in the backing directory is enforced through the
// mount, in a directory the watcher sees and in one it does not (past the
// mount's cap on watches): the kernel does not keep an ACL it read past the
// file's attributes.
func TestACLSetBehindTheMountIsEnforced(t *testing.T) {
	for _, watches := range []int{DefaultMaxWatches, 1} {
		t.Run(fmt.Sprintf("watches=%d", watches), func(t *testing.T) {
			m := mountShared(t, func(o *Options) { o.MaxWatches = watches })
			needACLs(t, m.backing)
			aclSetBehind(t, m)
		})
	}
}

// aclSetBehind has nobody read pub/f through m, denies them in its ACL in the
// backing directory, and waits for the mount to deny them too.
func aclSetBehind(t *testing.T, m *mounted) {
	t.Helper()
	backing := filepath.Join(m.backing, "pub", "f")
	if err := os.WriteFile(backing, []byte("readable, then not"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(m.mnt, "pub", "f")
	var before, after error
	denied := false
	asNobody(t, func() { _, before = os.ReadFile(p) })
	if before != nil {
		t.Fatalf("nobody reads the file before its ACL: %v", before)
	}
	if err := unix.Setxattr(backing, aclAccess, denyNobody, 0); err != nil {
		t.Fatal(err)
	}
	asNobody(t, func() {
		denied = testfuse.WaitFor(10*time.Second, func() bool {
			_, after = os.ReadFile(p)
			return errors.Is(after, os.ErrPermission)
		})
	})
	if !denied {
		t.Errorf("nobody still reads the file 10 s after its ACL denied them: %v", after)
	}
}

// Setting an access ACL clears the set-group-ID bit of a file whose group
// the caller is not in, as natively (xfstests generic/375): the daemon, root,
// set the ACL with its own right to keep the bit.
func TestSettingAnACLClearsSetgidOfANonMember(t *testing.T) {
	m := mountShared(t)
	needACLs(t, m.backing)
	acl := aclXattr(aclEntry{0x01, 7, 0}, aclEntry{0x02, 4, 1000}, aclEntry{0x04, 5, 0}, aclEntry{0x10, 5, 0}, aclEntry{0x20, 5, 0})
	modes := map[string]string{}
	for _, p := range []string{filepath.Join(m.mnt, "pub", "f"), filepath.Join(m.backing, "pub", "native")} {
		sgidFileOfNobody(t, strings.Replace(p, m.mnt, m.backing, 1))
		var err error
		asNobody(t, func() { err = unix.Setxattr(p, aclAccess, acl, 0) })
		if err != nil {
			t.Fatalf("nobody sets the ACL of %s: %v", p, err)
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		modes[filepath.Base(p)] = describeMode(st)
	}
	if modes["f"] != modes["native"] {
		t.Errorf("after nobody set its ACL, through the mount: %s; natively: %s", modes["f"], modes["native"])
	}
}

// sgidFileOfNobody makes p a file of nobody's, group root's, mode 02755.
func sgidFileOfNobody(t *testing.T, p string) {
	t.Helper()
	errs := []error{os.WriteFile(p, nil, 0o755), os.Chown(p, nobody, 0), unix.Chmod(p, 0o2755)}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
