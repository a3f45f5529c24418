package versionstore

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// probeFineCtime reports whether the filesystem of the directory dirfd
// gives a file a new ctime at every change made after its ctime was read,
// and the device it is: Linux's multigrain timestamps (ext4, XFS, btrfs and
// tmpfs since 6.13) take a fine-grained time for a change to an inode whose
// ctime was queried, where other filesystems reuse the clock tick's. It
// writes to an unnamed file (O_TMPFILE), which leaves nothing behind; a
// filesystem without one is taken as coarse. On a coarse filesystem two
// writes microseconds apart share a tick, so 16 of 16 pairs changing the
// ctime does not happen by chance.
func probeFineCtime(dirfd int) (dev uint64, fine bool) {
	fd, err := unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	var before, after unix.Stat_t
	for range 16 {
		if _, err := unix.Pwrite(fd, []byte{0}, 0); err != nil {
			return 0, false
		}
		if unix.Fstat(fd, &before) != nil {
			return 0, false
		}
		if _, err := unix.Pwrite(fd, []byte{0}, 0); err != nil {
			return 0, false
		}
		if unix.Fstat(fd, &after) != nil || after.Ctim == before.Ctim {
			return 0, false
		}
	}
	return after.Dev, true
}

// deviceOf is the device fi's file is on.
func deviceOf(fi fs.FileInfo) (uint64, bool) {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return st.Dev, true
	case *unix.Stat_t:
		return st.Dev, true
	}
	return 0, false
}
