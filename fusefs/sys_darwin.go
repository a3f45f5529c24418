package fusefs

import "golang.org/x/sys/unix"

const oPath = unix.O_RDONLY

func renameat2(olddirfd int, oldpath string, newdirfd int, newpath string, flags uint32) error {
	if flags != 0 {
		return unix.ENOTSUP
	}
	return unix.Renameat(olddirfd, oldpath, newdirfd, newpath)
}

func copyFileRange(rfd int, roff int64, wfd int, woff int64, n int, flags int) (int, error) {
	return 0, unix.ENOTSUP
}

func procPath(dirfd int, name string) string {
	return "/dev/fd/" + itoa(dirfd) + "/" + name
}

const (
	renameExchange = 1 << 1
	utimeOmit      = -2
)

func mknodat(dirfd int, name string, mode uint32, dev int) error { return unix.ENOTSUP }

func detach(mnt string) error { return unix.Unmount(mnt, unix.MNT_FORCE) }

func generation(dirfd int, name string) uint64 { return 1 }

// zeroMessageOpendir: macFUSE needs OPENDIR answered.
const zeroMessageOpendir = false
