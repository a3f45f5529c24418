package versionstore

import (
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once the kernel said it has no openat2 (before 5.6).
var noOpenat2 atomic.Bool

// openDir opens dir below root without following a symlink on the way: in
// one openat2 call that refuses any link and any escape from root, or, on
// a kernel without it, one element at a time (walkDir). create makes the
// missing directories, which openat2 cannot.
func openDir(root int, dir string, create bool, mode uint32) (int, error) {
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(root, dir, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
		})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, syscall.ENOSYS):
			noOpenat2.Store(true)
		case errors.Is(err, syscall.ENOENT) && create:
		case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EAGAIN):
			// A seccomp filter that refuses it; a rename racing the lookup.
		default:
			return -1, err
		}
	}
	return walkDir(root, dir, create, mode)
}

// bornAt is the birth time of name in the directory dirfd, not following a
// symlink; ok is false when the filesystem keeps none.
func bornAt(dirfd int, name string) (born time.Time, ok bool) {
	var stx unix.Statx_t
	if err := unix.Statx(dirfd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &stx); err != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}, false
	}
	return time.Unix(stx.Btime.Sec, int64(stx.Btime.Nsec)), true
}
