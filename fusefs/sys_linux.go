package fusefs

import "golang.org/x/sys/unix"

// oPath opens a directory only to name it in *at calls.
const oPath = unix.O_PATH

func renameat2(olddirfd int, oldpath string, newdirfd int, newpath string, flags uint32) error {
	return unix.Renameat2(olddirfd, oldpath, newdirfd, newpath, uint(flags))
}

func copyFileRange(rfd int, roff int64, wfd int, woff int64, n int, flags int) (int, error) {
	return unix.CopyFileRange(rfd, &roff, wfd, &woff, n, flags)
}

// procPath names dirfd/name through /proc, for the xattr calls that have no
// *at form.
func procPath(dirfd int, name string) string {
	return "/proc/self/fd/" + itoa(dirfd) + "/" + name
}

const (
	renameExchange = unix.RENAME_EXCHANGE
	utimeOmit      = unix.UTIME_OMIT
)

func mknodat(dirfd int, name string, mode uint32, dev int) error {
	return unix.Mknodat(dirfd, name, mode, dev)
}

// detach unmounts lazily: the mount disappears now, and goes once unused.
func detach(mnt string) error { return unix.Unmount(mnt, unix.MNT_DETACH) }

// generation is the birth time of dirfd/name (of dirfd itself when name is
// ""): with the inode number it tells apart files that reuse a number, as
// ext4 does at once after a tool publish frees the replaced file's.
func generation(dirfd int, name string) uint64 {
	var stx unix.Statx_t
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if unix.Statx(dirfd, name, flags, unix.STATX_BTIME, &stx) != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return 1
	}
	return uint64(stx.Btime.Sec)*1e9 + uint64(stx.Btime.Nsec)
}

// zeroMessageOpendir: Linux (since 5.1) opens directories without OPENDIR
// when the daemon answers it with ENOSYS.
const zeroMessageOpendir = true
