package fusefs

// Helpers for tests of a mount shared with other users (allow_other): the
// daemon runs as root and serves an unprivileged caller, nobody.

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

const nobody = 65534

// mountShared mounts, with allow_other, a workspace that nobody can reach,
// holding a world-writable sticky directory pub, as /tmp is.
func mountShared(t *testing.T, opts ...func(*Options)) *mounted {
	t.Helper()
	opts = append(opts, func(o *Options) { o.AllowOther = true })
	m := mountWith(t, func(backing string) {
		pub := filepath.Join(backing, "pub")
		for _, err := range []error{
			os.Chmod(backing, 0o755),
			os.Mkdir(pub, 0o777),
			os.Chmod(pub, 0o777|os.ModeSticky),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}, opts...)
	// t.TempDir's first level is 0700: let nobody reach the mount point.
	if err := os.Chmod(filepath.Dir(filepath.Dir(m.mnt)), 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// asNobody runs fn on an OS thread of its own with nobody's credentials —
// uid and gid 65534, no supplementary groups, no capabilities — as a
// process of another user would: FUSE takes the caller's ids from the
// calling thread, and the kernel checks that thread's permissions. fn must
// not call t.Fatal.
func asNobody(t *testing.T, fn func()) {
	t.Helper()
	onThread(t, becomeNobody, fn)
}

// onThread runs fn on an OS thread of its own, after become changed that
// thread's credentials. The thread never goes back to the scheduler (it
// ends with fn), and the runtime does not clone new threads from a locked
// one, so no other goroutine ever runs with them.
func onThread(t *testing.T, become func() error, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		err := become()
		if err == nil {
			fn()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatalf("change the thread's credentials: %v", err)
	}
}

// dropSysAdmin takes CAP_SYS_ADMIN out of the calling thread's effective
// set (capset changes the calling thread only).
func dropSysAdmin() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	data[unix.CAP_SYS_ADMIN/32].Effective &^= 1 << (unix.CAP_SYS_ADMIN % 32)
	return unix.Capset(&hdr, &data[0])
}

// becomeNobody changes the calling thread's credentials only, with raw
// system calls: the syscall package's Setresuid and the like change every
// thread of the process.
func becomeNobody() error {
	for _, c := range []struct{ trap, id uintptr }{
		{unix.SYS_SETGROUPS, 0}, // setgroups(0, NULL)
		{unix.SYS_SETRESGID, nobody},
		{unix.SYS_SETRESUID, nobody},
	} {
		if _, _, e := unix.RawSyscall(c.trap, c.id, c.id, c.id); e != 0 {
			return e
		}
	}
	return nil
}

// staleAbsent leaves the kernel believing rel absent, as a negative entry
// it trusts for the cache timeout: nobody creates rel through the mount,
// unlinks it and looks it up again. A file created straight in the backing
// directory within the watcher's own-change window (100 ms) stays hidden
// behind that entry.
func (m *mounted) staleAbsent(rel string) {
	m.t.Helper()
	p := filepath.Join(m.mnt, rel)
	var err error
	asNobody(m.t, func() {
		if err = os.WriteFile(p, nil, 0o644); err != nil {
			return
		}
		if err = syscall.Unlink(p); err != nil {
			return
		}
		if _, err = os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			err = nil
		} else if err == nil {
			err = errors.New("still there after unlink")
		}
	})
	if err != nil {
		m.t.Fatalf("leave %s absent in the kernel's cache: %v", rel, err)
	}
}

// mine makes rel nobody's file (or directory) through the mount, so that
// the kernel caches nobody's entry for it.
func (m *mounted) mine(rel string, dir bool) {
	m.t.Helper()
	p := filepath.Join(m.mnt, rel)
	var err error
	asNobody(m.t, func() {
		if dir {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, []byte("mine\n"), 0o644)
		}
	})
	if err != nil {
		m.t.Fatalf("nobody creates %s: %v", rel, err)
	}
}

// rootsEntry is an entry root put straight into the backing directory.
type rootsEntry struct {
	ino  uint64
	mode uint32
}

const secret = "root's secret\n"

// putSecret creates rel in the backing directory as root's file, mode
// 0600, holding secret.
func (m *mounted) putSecret(rel string) rootsEntry {
	m.t.Helper()
	p := filepath.Join(m.backing, rel)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.WriteString(secret)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		m.t.Fatal(err)
	}
	return m.rootsEntryAt(rel)
}

// swapIn replaces rel in the backing directory, behind the kernel's back,
// with root's entry (see rootsOwn), made under a temporary name and renamed
// over rel.
func (m *mounted) swapIn(rel string, dir bool) rootsEntry {
	m.t.Helper()
	m.rootsOwn(rel+".swap", dir)
	// Not os.Rename, which refuses to replace a directory.
	if err := unix.Rename(filepath.Join(m.backing, rel+".swap"), filepath.Join(m.backing, rel)); err != nil {
		m.t.Fatal(err)
	}
	return m.rootsEntryAt(rel)
}

// rootsOwn makes rel in the backing directory root's file (mode 0600,
// holding secret) or root's empty directory (mode 0700).
func (m *mounted) rootsOwn(rel string, dir bool) rootsEntry {
	m.t.Helper()
	if !dir {
		return m.putSecret(rel)
	}
	if err := os.Mkdir(filepath.Join(m.backing, rel), 0o700); err != nil {
		m.t.Fatal(err)
	}
	return m.rootsEntryAt(rel)
}

func (m *mounted) rootsEntryAt(rel string) rootsEntry {
	m.t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(m.backing, rel), &st); err != nil {
		m.t.Fatal(err)
	}
	if st.Uid != 0 {
		m.t.Fatalf("%s belongs to uid %d, not root", rel, st.Uid)
	}
	return rootsEntry{st.Ino, st.Mode}
}

// wantIntact fails unless rel is still root's entry e, untouched: same
// inode, owner, mode and (for a file) bytes, and no extended attribute.
func (m *mounted) wantIntact(rel string, e rootsEntry) {
	m.t.Helper()
	p := filepath.Join(m.backing, rel)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		m.t.Fatalf("root's %s: %v", rel, err)
	}
	if st.Ino != e.ino || st.Uid != 0 || st.Gid != 0 || st.Mode != e.mode {
		m.t.Fatalf("root's %s is now ino %d uid %d gid %d mode %o, was ino %d uid 0 gid 0 mode %o",
			rel, st.Ino, st.Uid, st.Gid, st.Mode, e.ino, e.mode)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		if b, _ := os.ReadFile(p); string(b) != secret {
			m.t.Fatalf("root's %s holds %q, not its secret", rel, b)
		}
	}
	if names, _ := listXattrs(p); len(names) != 0 {
		m.t.Fatalf("root's %s has extended attributes %q", rel, names)
	}
}

// openAndRead opens p with flags (creating it 0644) and reads it whole.
func openAndRead(p string, flags int) (string, error) {
	f, err := os.OpenFile(p, flags, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

// listXattrs lists p's extended attribute names.
func listXattrs(p string) ([]string, error) {
	for {
		size, err := unix.Llistxattr(p, nil)
		if err != nil || size == 0 {
			return nil, err
		}
		buf := make([]byte, size)
		k, err := unix.Llistxattr(p, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // grew meanwhile
		}
		if err != nil {
			return nil, err
		}
		return strings.FieldsFunc(string(buf[:k]), func(r rune) bool { return r == 0 }), nil
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
