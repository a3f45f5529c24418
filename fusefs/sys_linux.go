package fusefs

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// oPath opens a directory only to name it in *at calls.
const oPath = unix.O_PATH

func renameat2(olddirfd int, oldpath string, newdirfd int, newpath string, flags uint32) error {
	return unix.Renameat2(olddirfd, oldpath, newdirfd, newpath, uint(flags))
}

func copyFileRange(rfd int, roff int64, wfd int, woff int64, n int, flags int) (int, error) {
	return unix.CopyFileRange(rfd, &roff, wfd, &woff, n, flags)
}

// fileClone makes dst share src's blocks (FICLONE), where the filesystem can.
func fileClone(dst, src int) error { return unix.IoctlFileClone(dst, src) }

// procPath names dirfd/name through /proc, for the xattr calls that have no
// *at form.
func procPath(dirfd int, name string) string {
	return "/proc/self/fd/" + itoa(dirfd) + "/" + name
}

const (
	renameNoreplace = unix.RENAME_NOREPLACE
	renameExchange  = unix.RENAME_EXCHANGE
	utimeOmit       = unix.UTIME_OMIT
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
	_, gen, err := identity(dirfd, name)
	if err != nil {
		return 1
	}
	return gen
}

// identity is the inode number and generation of dirfd/name (of dirfd
// itself when name is ""), as a node's StableAttr holds them. One statx.
func identity(dirfd int, name string) (ino, gen uint64, err error) {
	ino, gen, _, err = typedIdentity(dirfd, name)
	return ino, gen, err
}

// typedIdentity is identity and the file's type (S_IFMT bits).
func typedIdentity(dirfd int, name string) (ino, gen uint64, typ uint32, err error) {
	var stx unix.Statx_t
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if err := unix.Statx(dirfd, name, flags, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_BTIME, &stx); err != nil {
		return 0, 0, 0, err
	}
	typ = uint32(stx.Mode) & unix.S_IFMT
	if stx.Mask&unix.STATX_BTIME == 0 {
		return stx.Ino, 1, typ, nil
	}
	return stx.Ino, uint64(stx.Btime.Sec)*1e9 + uint64(stx.Btime.Nsec), typ, nil
}

// coarseNow is the clock the kernel stamps new inodes with (their birth
// time is never earlier than it was before they were made).
func coarseNow() unix.Timespec {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
	return ts
}

// bornSince reports whether the entry open at fd is of type typ, root's,
// and, where the filesystem keeps birth times, born at since or later: an
// entry the daemon has just made, not one moved into its name.
func bornSince(fd int, typ uint32, since unix.Timespec) bool {
	var stx unix.Statx_t
	flags := unix.AT_EMPTY_PATH | unix.AT_SYMLINK_NOFOLLOW
	if unix.Statx(fd, "", flags, unix.STATX_TYPE|unix.STATX_UID|unix.STATX_BTIME, &stx) != nil {
		return false
	}
	if uint32(stx.Mode)&unix.S_IFMT != typ || stx.Uid != 0 {
		return false
	}
	b := stx.Btime
	return stx.Mask&unix.STATX_BTIME == 0 || b.Sec > since.Sec || b.Sec == since.Sec && int64(b.Nsec) >= since.Nsec
}

// openNode opens dirfd/name itself — a symlink, FIFO or device as well —
// without opening it for reading or writing: a descriptor to check and
// act on (O_PATH).
func openNode(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// fdPath leads, through /proc, to the very inode open at fd, whatever its
// names are now: the system calls that take no O_PATH descriptor take it.
func fdPath(fd int) string { return "/proc/self/fd/" + itoa(fd) }

func (r nodeRef) chmod(mode uint32) error {
	if !noFchmodat2.Load() {
		err := unix.Fchmodat(r.fd, "", mode, unix.AT_EMPTY_PATH) // fchmodat2, Linux 6.6
		if err != unix.EOPNOTSUPP {
			return err
		}
		if err := unix.Fchmodat(unix.AT_FDCWD, fdPath(r.fd), mode, 0); err != nil {
			return err
		}
		noFchmodat2.Store(true)
		return nil
	}
	return unix.Fchmodat(unix.AT_FDCWD, fdPath(r.fd), mode, 0)
}

// noFchmodat2 and noGetxattrat are set once the kernel said it has no
// such system call: the /proc paths do the same work with a lookup more.
var noFchmodat2, noGetxattrat atomic.Bool

// lgetxattrAt reads attribute attr of dirfd/name, not following a
// symlink: getxattrat (Linux 6.13), else by name under /proc.
func lgetxattrAt(dirfd int, name, attr string, dest []byte) (int, error) {
	if !noGetxattrat.Load() {
		n, err := getxattrat(dirfd, name, attr, dest)
		if err != unix.ENOSYS {
			return n, err
		}
		noGetxattrat.Store(true)
	}
	return unix.Lgetxattr(procPath(dirfd, name), attr, dest)
}

// xattrArgs is the kernel's struct xattr_args.
type xattrArgs struct {
	value uint64
	size  uint32
	flags uint32
}

func getxattrat(dirfd int, name, attr string, dest []byte) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	a, err := unix.BytePtrFromString(attr)
	if err != nil {
		return 0, err
	}
	var args xattrArgs
	if len(dest) > 0 {
		args.value, args.size = uint64(uintptr(unsafe.Pointer(&dest[0]))), uint32(len(dest))
	}
	n, _, errno := unix.Syscall6(unix.SYS_GETXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
		unix.AT_SYMLINK_NOFOLLOW, uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
	runtime.KeepAlive(dest)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func (r nodeRef) chown(uid, gid int) error {
	return unix.Fchownat(r.fd, "", uid, gid, unix.AT_EMPTY_PATH)
}

func (r nodeRef) utimes(ts []unix.Timespec) error {
	return unix.UtimesNanoAt(r.fd, "", ts, unix.AT_EMPTY_PATH)
}

// reopen opens the inode for reading or writing.
func (r nodeRef) reopen(flags int) (int, error) {
	return unix.Open(fdPath(r.fd), flags|unix.O_CLOEXEC, 0)
}

// link gives the inode the name dirfd/name (AT_SYMLINK_FOLLOW follows the
// /proc link to the inode, not a symlink the inode may be).
func (r nodeRef) link(dirfd int, name string) error {
	return unix.Linkat(unix.AT_FDCWD, fdPath(r.fd), dirfd, name, unix.AT_SYMLINK_FOLLOW)
}

func (r nodeRef) getxattr(attr string, dest []byte) (int, error) {
	return unix.Getxattr(fdPath(r.fd), attr, dest)
}

func (r nodeRef) setxattr(attr string, data []byte, flags int) error {
	return unix.Setxattr(fdPath(r.fd), attr, data, flags)
}

func (r nodeRef) removexattr(attr string) error {
	return unix.Removexattr(fdPath(r.fd), attr)
}

// zeroMessageOpendir: Linux (since 5.1) opens directories without OPENDIR
// when the daemon answers it with ENOSYS.
const zeroMessageOpendir = true

// capSysAdmin reports whether the thread pid (a FUSE request's caller) has
// CAP_SYS_ADMIN, in the daemon's user namespace: what the kernel asks of a
// caller to list trusted.* names. It reads the effective set from
// /proc/PID/status, which is the calling thread's (FUSE sends the thread's
// id). Not uid 0 alone: a root process may have dropped the capability, and
// root in a user namespace of its own has it there only. False when it
// cannot tell (the caller gone meanwhile, or no /proc).
func capSysAdmin(pid uint32) bool { return callerHas(pid, unix.CAP_SYS_ADMIN) }

// capFsetid reports whether the caller pid may keep a file's set-id bits
// when it writes or truncates the file (CAP_FSETID); as capSysAdmin.
func capFsetid(pid uint32) bool { return callerHas(pid, unix.CAP_FSETID) }

// callerHas reports whether the thread pid has capability c in its
// effective set, in the daemon's user namespace.
func callerHas(pid uint32, c int) bool {
	if pid == 0 {
		return false
	}
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return false
	}
	_, rest, ok := bytes.Cut(status, []byte("\nCapEff:"))
	if !ok {
		return false
	}
	hex, _, _ := bytes.Cut(bytes.TrimSpace(rest), []byte("\n"))
	eff, err := strconv.ParseUint(string(bytes.TrimSpace(hex)), 16, 64)
	if err != nil || eff&(1<<c) == 0 {
		return false
	}
	var theirs, ours unix.Stat_t
	return unix.Stat(dir+"/ns/user", &theirs) == nil && unix.Stat("/proc/self/ns/user", &ours) == nil &&
		theirs.Ino == ours.Ino && theirs.Dev == ours.Dev
}

// inGroups reports whether gid is among the supplementary groups of the
// thread pid (/proc/PID/status); false when it cannot tell.
func inGroups(pid uint32, gid uint32) bool {
	status, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return false
	}
	_, rest, ok := bytes.Cut(status, []byte("\nGroups:"))
	if !ok {
		return false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	for _, g := range bytes.Fields(line) {
		if n, err := strconv.ParseUint(string(g), 10, 32); err == nil && uint32(n) == gid {
			return true
		}
	}
	return false
}

// capHandleKillpriv is negotiated: see killpriv.go.
const capHandleKillpriv = fuse.CAP_HANDLE_KILLPRIV_V2

// The file attribute ioctls (linux/fs.h); struct fsxattr is 28 bytes.
const (
	fsIocFsgetxattr = 0x801c581f // _IOR('X', 31, struct fsxattr)
	fsIocFssetxattr = 0x401c5820 // _IOW('X', 32, struct fsxattr)
)

// fileattrSet reports whether cmd is a fileattr ioctl that changes the file.
func fileattrSet(cmd uint32) bool { return cmd == unix.FS_IOC_SETFLAGS || cmd == fsIocFssetxattr }

// fileattrIoctl reports whether cmd is one of the ioctls the kernel's
// fileattr layer sends a FUSE daemon, having checked the caller.
func fileattrIoctl(cmd uint32) bool {
	switch cmd {
	case unix.FS_IOC_GETFLAGS, unix.FS_IOC_SETFLAGS, fsIocFsgetxattr, fsIocFssetxattr:
		return true
	}
	return false
}

// aclCaps are the capabilities POSIX ACLs need besides FUSE_POSIX_ACL
// (acl.go): the kernel leaves the caller's umask to the daemon, and says
// when setting an ACL must clear the set-group-ID bit.
const aclCaps = fuse.CAP_DONT_MASK | fuse.CAP_SETXATTR_EXT

// SetXAttr remembers whether setting this access ACL must clear the file's
// set-group-ID bit (acl.go).
func (u aclRequests) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	defer u.f.keepFacts(cancel, requestFacts{killSGID: in.SetXAttrFlags&fuse.SETXATTR_ACL_KILL_SGID != 0})()
	return u.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

// hasDefaultACL reports whether the directory dirfd (O_PATH) has a default
// ACL. An error reading it counts as none: the caller's umask then applies.
func hasDefaultACL(dirfd int) bool {
	n, err := unix.Getxattr(fdPath(dirfd), "system.posix_acl_default", nil)
	return err == nil && n > 0
}
