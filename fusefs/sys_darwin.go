package fusefs

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

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

func fileClone(dst, src int) error { return unix.ENOTSUP }

func procPath(dirfd int, name string) string {
	return "/dev/fd/" + itoa(dirfd) + "/" + name
}

const (
	renameNoreplace = 1 << 0
	renameExchange  = 1 << 1
	utimeOmit       = -2
)

func mknodat(dirfd int, name string, mode uint32, dev int) error { return unix.ENOTSUP }

// fdPath leads to the file open at fd, as /proc/self/fd does on Linux.
func fdPath(fd int) string { return "/dev/fd/" + itoa(fd) }

func detach(mnt string) error { return unix.Unmount(mnt, unix.MNT_FORCE) }

func generation(dirfd int, name string) uint64 { return 1 }

// identity is the inode number of dirfd/name (of dirfd itself when name is
// ""), and generation 1: macOS has no birth time to tell reused numbers
// apart by.
func identity(dirfd int, name string) (ino, gen uint64, err error) {
	ino, gen, _, err = typedIdentity(dirfd, name)
	return ino, gen, err
}

// typedIdentity is identity and the file's type (S_IFMT bits).
func typedIdentity(dirfd int, name string) (ino, gen uint64, typ uint32, err error) {
	var st unix.Stat_t
	if name == "" {
		err = unix.Fstat(dirfd, &st)
	} else {
		err = unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	return st.Ino, 1, uint32(st.Mode) & unix.S_IFMT, err
}

func coarseNow() unix.Timespec { return unix.NsecToTimespec(time.Now().UnixNano()) }

// bornSince reports whether the entry open at fd is of type typ, root's,
// and born at since or later: an entry the daemon has just made.
func bornSince(fd int, typ uint32, since unix.Timespec) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || uint32(st.Mode)&unix.S_IFMT != typ || st.Uid != 0 {
		return false
	}
	b := st.Btim
	return b.Sec > since.Sec || b.Sec == since.Sec && b.Nsec >= since.Nsec
}

// openNode opens dirfd/name itself (a symlink too) to check and act on.
// macOS has no O_PATH: this is a read-only open that does not block.
func openNode(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_SYMLINK|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
}

// On macOS the operations a descriptor allows go through it; the others
// go by name, as checked just before.

func (r nodeRef) chmod(mode uint32) error       { return unix.Fchmod(r.fd, mode) }
func (r nodeRef) chown(uid, gid int) error      { return unix.Fchown(r.fd, uid, gid) }
func (r nodeRef) removexattr(attr string) error { return unix.Fremovexattr(r.fd, attr) }

func (r nodeRef) utimes(ts []unix.Timespec) error {
	return unix.UtimesNanoAt(r.dir, r.name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// reopen opens r's name again, for reading or writing: without blocking,
// as the name may hold a FIFO by now (the caller checks the inode), and
// with the caller's O_NONBLOCK only once open.
func (r nodeRef) reopen(flags int) (int, error) {
	fd, err := unix.Openat(r.dir, r.name, flags|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil || flags&unix.O_NONBLOCK != 0 {
		return fd, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags&^unix.O_ACCMODE); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func (r nodeRef) link(dirfd int, name string) error {
	return unix.Linkat(r.dir, r.name, dirfd, name, 0)
}

func (r nodeRef) getxattr(attr string, dest []byte) (int, error) {
	return unix.Fgetxattr(r.fd, attr, dest)
}

func (r nodeRef) setxattr(attr string, data []byte, flags int) error {
	return unix.Fsetxattr(r.fd, attr, data, flags)
}

// zeroMessageOpendir: macFUSE needs OPENDIR answered.
const zeroMessageOpendir = false

// capSysAdmin: macOS has no trusted.* namespace to hide (see the Linux
// version); such names are ordinary ones there.
func capSysAdmin(pid uint32) bool { return true }

// fileattrIoctl: macOS passes on no file attribute ioctls (see the Linux
// version); none is run for a caller.
func fileattrIoctl(cmd uint32) bool { return false }

// fileattrSet: none on macOS (see fileattrIoctl).
func fileattrSet(cmd uint32) bool { return false }

// passthroughPossible: macFUSE has no kernel passthrough.
func passthroughPossible() bool { return false }

func probePassthrough(*fuse.Server, int) error { return unix.ENOTSUP }

func reopenReadOnly(fd int) (int, error) { return -1, unix.ENOTSUP }

func writableElsewhere(ro int) (bool, error) { return false, unix.ENOTSUP }

// capFsetid: see the Linux version; macFUSE does not negotiate killpriv.
func capFsetid(pid uint32) bool { return true }

// capHandleKillpriv: macFUSE clears set-id bits itself.
const capHandleKillpriv = 0

func inGroups(pid uint32, gid uint32) bool { return false }

func lgetxattrAt(dirfd int, name, attr string, dest []byte) (int, error) {
	return unix.Lgetxattr(procPath(dirfd, name), attr, dest)
}

// aclCaps: macFUSE has no POSIX ACLs to negotiate.
const aclCaps = 0

// hasDefaultACL: macOS has no POSIX default ACLs.
func hasDefaultACL(dirfd int) bool { return false }
