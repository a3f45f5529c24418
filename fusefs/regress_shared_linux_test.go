// Regression tests of a mount shared with other users (allow_other), the
// daemon running as root: each comment says what used to go wrong.

package fusefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

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

// Operations by name ran as root on whatever the backing name held, while
// the kernel had checked the caller against the entry it cached for the
// name. When root put its own file or directory in place of the caller's,
// straight in the backing directory and within the watcher's 100 ms (so
// the kernel kept the caller's entry), the caller could unlink, remove,
// rename, hard-link, chmod or set extended attributes on root's entry, or
// look up, list and create inside root's private directory — none of which
// the sticky bit, root's ownership and the mode allow natively.
func TestOpsOnANameSwappedBehindTheKernel(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  bool
		op   func(p string) error // p is the name in the mount, as nobody
		want syscall.Errno        // 0: any error
	}{
		{"unlink", false, syscall.Unlink, syscall.EPERM},
		{"rmdir", true, syscall.Rmdir, syscall.EPERM},
		{"rename", false, func(p string) error { return os.Rename(p, p+".moved") }, syscall.EPERM},
		{"rename-over", false, func(p string) error {
			if err := os.WriteFile(p+".src", nil, 0o644); err != nil {
				return err
			}
			return os.Rename(p+".src", p)
		}, syscall.EPERM},
		{"link", false, func(p string) error { return os.Link(p, p+".link") }, syscall.EPERM},
		{"chmod", false, func(p string) error { return os.Chmod(p, 0o666) }, syscall.EPERM},
		{"chgrp", false, func(p string) error { return os.Lchown(p, -1, nobody) }, syscall.EPERM},
		{"utimes", false, func(p string) error { return unix.UtimesNano(p, make([]unix.Timespec, 2)) }, syscall.EPERM},
		{"truncate", false, func(p string) error { return os.Truncate(p, 0) }, syscall.EACCES},
		{"setxattr", false, func(p string) error { return unix.Lsetxattr(p, "user.k", []byte("v"), 0) }, syscall.EACCES},
		{"lookup-inside", true, func(p string) error { _, err := os.Lstat(p + "/f"); return err }, syscall.EACCES},
		{"create-inside", true, func(p string) error { return os.WriteFile(p+"/f", nil, 0o644) }, syscall.EACCES},
		{"readdir", true, func(p string) error { _, err := os.ReadDir(p); return err }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mountShared(t)
			m.mine("pub/n", tc.dir)
			e := m.swapIn("pub/n", tc.dir)
			var err error
			asNobody(t, func() { err = tc.op(filepath.Join(m.mnt, "pub/n")) })
			m.wantIntact("pub/n", e)
			for _, left := range []string{"pub/n.moved", "pub/n.link", "pub/n/f"} {
				if _, lerr := os.Lstat(filepath.Join(m.backing, left)); lerr == nil {
					t.Errorf("%s exists", left)
				}
			}
			if err == nil || tc.want != 0 && !errors.Is(err, tc.want) {
				t.Fatalf("%s of root's entry as nobody: %v, want %v", tc.name, err, errnoOrAny(tc.want))
			}
		})
	}
}

// A rename onto a name the kernel believed absent (a stale negative entry)
// replaced whatever the backing directory held there: root's file, in a
// sticky directory where nobody may not replace it.
func TestRenameOntoAStaleNegativeEntry(t *testing.T) {
	m := mountShared(t)
	m.staleAbsent("pub/t")
	e := m.putSecret("pub/t")
	var err error
	asNobody(t, func() {
		if err = os.WriteFile(filepath.Join(m.mnt, "pub/src"), nil, 0o644); err == nil {
			err = os.Rename(filepath.Join(m.mnt, "pub/src"), filepath.Join(m.mnt, "pub/t"))
		}
	})
	m.wantIntact("pub/t", e)
	if !errors.Is(err, syscall.EPERM) {
		t.Fatalf("rename onto root's file as nobody: %v, want EPERM", err)
	}
}

// Listxattr listed trusted.* names to every caller. Natively only a caller
// with CAP_SYS_ADMIN sees them (the VFS already refuses reading or setting
// them to the others, before FUSE sees the request); security.* names are
// listed to everyone, natively too. Each caller must list through the
// mount what it lists on the backing file itself.
func TestTrustedXattrsAreListedOnlyToTheCapable(t *testing.T) {
	m := mountShared(t)
	m.putBacking("pub/f", "x")
	back := filepath.Join(m.backing, "pub/f")
	for _, name := range []string{"trusted.x", "user.y", "security.z"} {
		if err := unix.Lsetxattr(back, name, []byte("1"), 0); err != nil {
			t.Fatalf("set %s: %v", name, err)
		}
	}
	for _, tc := range []struct {
		who    string
		become func() error
		want   []string
	}{
		{"nobody", becomeNobody, []string{"security.z", "user.y"}},
		{"root without CAP_SYS_ADMIN", dropSysAdmin, []string{"security.z", "user.y"}},
		{"root", func() error { return nil }, []string{"security.z", "trusted.x", "user.y"}},
	} {
		var mounted, native []string
		var merr, nerr error
		onThread(t, tc.become, func() {
			mounted, merr = listXattrs(filepath.Join(m.mnt, "pub/f"))
			native, nerr = listXattrs(back)
		})
		if merr != nil || nerr != nil {
			t.Fatalf("%s: list: %v, natively %v", tc.who, merr, nerr)
		}
		slices.Sort(mounted)
		slices.Sort(native)
		if !slices.Equal(mounted, tc.want) || !slices.Equal(native, tc.want) {
			t.Errorf("%s lists %q through the mount and %q natively, want %q", tc.who, mounted, native, tc.want)
		}
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

// Every ioctl on a file opened through the mount was run by the daemon on
// the backing descriptor, as root, so the filesystem's capability checks
// passed for anyone: here EXT4_IOC_CHECKPOINT in its dry run, which needs
// CAP_SYS_ADMIN and changes nothing (EXT4_IOC_SHUTDOWN would have taken
// the backing filesystem down). The file attribute ioctls of lsattr and
// chattr, which the kernel checks against the caller, still work.
func TestIoctlsRunOnlyAsTheCallerMay(t *testing.T) {
	const ext4IocCheckpoint, dryRun = 0x4004662b, 4 // _IOW('f', 43, __u32)
	const nodump, immutable = 0x40, 0x10            // FS_NODUMP_FL, FS_IMMUTABLE_FL
	m := mountShared(t)
	t.Cleanup(func() { // were the file made immutable, t.TempDir could not remove it
		unix.IoctlSetPointerInt(openFd(t, filepath.Join(m.backing, "pub/f")), unix.FS_IOC_SETFLAGS, 0)
	})
	var ckpt, get, set, setImmutable error
	asNobody(t, func() {
		f, err := os.OpenFile(filepath.Join(m.mnt, "pub/f"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			ckpt = err
			return
		}
		defer f.Close()
		fd := int(f.Fd())
		flags := uint32(dryRun)
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ext4IocCheckpoint, uintptr(unsafe.Pointer(&flags))); e != 0 {
			ckpt = e
		}
		var attrs uint32
		attrs, get = unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
		set = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(attrs|nodump))
		setImmutable = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(attrs|immutable))
	})
	if ckpt == nil || !errors.Is(ckpt, syscall.ENOTTY) && !errors.Is(ckpt, syscall.EPERM) {
		t.Errorf("EXT4_IOC_CHECKPOINT as nobody: %v, want ENOTTY or EPERM (it needs CAP_SYS_ADMIN)", ckpt)
	}
	if get != nil || set != nil {
		t.Errorf("lsattr and chattr +d of one's own file: %v, %v", get, set)
	}
	if !errors.Is(setImmutable, syscall.EPERM) {
		t.Errorf("chattr +i of one's own file as nobody: %v, want EPERM", setImmutable)
	}
	got, err := unix.IoctlGetUint32(openFd(t, filepath.Join(m.backing, "pub/f")), unix.FS_IOC_GETFLAGS)
	if err != nil || got&nodump == 0 || got&immutable != 0 {
		t.Errorf("the backing file's flags are %#x (%v), want nodump and not immutable", got, err)
	}
}

// openFd opens p for reading until the test ends.
func openFd(t *testing.T, p string) int {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

func errnoOrAny(e syscall.Errno) any {
	if e == 0 {
		return "an error"
	}
	return e
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
			time.Sleep(30 * time.Millisecond) // a few ticks of the coarse clock
			var err error
			asNobody(t, func() { err = tc.make(filepath.Join(m.mnt, "pub/n")) })
			m.wantIntact("pub/n", e)
			if !errors.Is(err, fs.ErrExist) {
				t.Fatalf("%s as nobody: %v, want the name taken (EEXIST)", tc.name, err)
			}
		})
	}
}
