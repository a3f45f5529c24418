package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Byte-range locks were taken by the daemon as open-file-description locks
// on its own descriptor of each open: a process's POSIX locks through two
// of its descriptors conflicted with each other, where natively a process
// never conflicts with itself, and F_GETLK reported a write lock where
// there is none (xfstests generic/478). Each case locks [0, 10) through
// one descriptor and asks about [5, 25) through another of the same file.
func TestByteRangeLocksBetweenDescriptors(t *testing.T) {
	m := mountT(t)
	p := filepath.Join(m.mnt, "f")
	if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		set, get int // F_SETLK or F_OFD_SETLK; F_GETLK or F_OFD_GETLK
		typ      int16
		want     int16 // the type F_GETLK answers
	}{
		{"posix write, posix get", unix.F_SETLK, unix.F_GETLK, unix.F_WRLCK, unix.F_UNLCK},
		{"posix read, posix get", unix.F_SETLK, unix.F_GETLK, unix.F_RDLCK, unix.F_UNLCK},
		{"posix write, ofd get", unix.F_SETLK, unix.F_OFD_GETLK, unix.F_WRLCK, unix.F_WRLCK},
		{"ofd write, posix get", unix.F_OFD_SETLK, unix.F_GETLK, unix.F_WRLCK, unix.F_WRLCK},
		{"ofd write, ofd get", unix.F_OFD_SETLK, unix.F_OFD_GETLK, unix.F_WRLCK, unix.F_WRLCK},
		{"ofd read, ofd get", unix.F_OFD_SETLK, unix.F_OFD_GETLK, unix.F_RDLCK, unix.F_RDLCK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd1, fd2 := openRW(t, p), openRW(t, p)
			lk := unix.Flock_t{Type: tc.typ, Whence: 0, Start: 0, Len: 10}
			if err := unix.FcntlFlock(uintptr(fd1), tc.set, &lk); err != nil {
				t.Fatalf("lock [0, 10): %v", err)
			}
			q := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 5, Len: 20}
			if err := unix.FcntlFlock(uintptr(fd2), tc.get, &q); err != nil {
				t.Fatalf("get [5, 25): %v", err)
			}
			if q.Type != tc.want {
				t.Errorf("get [5, 25) through the other descriptor: type %d (start %d len %d pid %d), want %d",
					q.Type, q.Start, q.Len, q.Pid, tc.want)
			}
		})
	}
}

// openRW opens p for reading and writing until the test ends.
func openRW(t *testing.T, p string) int {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}
