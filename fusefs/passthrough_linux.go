package fusefs

import (
	"fmt"
	"os"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Kernel passthrough (Linux 6.9 and later, a daemon with CAP_SYS_ADMIN):
// every regular file opened through the mount is backed by its file in the
// backing directory, and the kernel reads and writes that file itself, as
// fast as the backing filesystem. The daemon never sees a WRITE, but it
// still sees every open (with its flags, so it knows who opened the file for
// writing), truncate, chmod, fallocate, copy_file_range, fsync and release —
// which is all a version needs: the file is being written from its first
// open for writing to its last writer's release, and its version is the
// hash of its bytes on disk then.
//
// The kernel requires every open of a file to be passthrough while one is,
// so in this mode all of them are. It opens, for each open of the mount's
// file, a file of its own on the backing file registered for it, with the
// open's flags; so the descriptor registered is a read-only one, and the
// only descriptors open for writing on the backing file are the writers' own.
// That makes a shared writable mapping that outlives its file's close
// visible: it holds a writable file, which a read lease probe sees (mapped.go).

// passthroughPossible reports whether this daemon may register backing
// files, so that mounting with passthrough is worth trying.
func passthroughPossible() bool {
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_SYS_ADMIN) != 0
}

// probePassthrough registers a backing file on the mounted connection and
// takes a read lease on it, as every open and release in passthrough mode
// will: if either fails, the mount must not use passthrough (go-fuse turns
// it off for good at the first failed registration, and the kernel then
// fails the opens of files that are open already).
func probePassthrough(server *fuse.Server, rootFd int) error {
	fd, err := unix.Openat(rootFd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("open a temporary file in the backing directory: %w", err)
	}
	ro, err := reopenReadOnly(fd)
	unix.Close(fd)
	if err != nil {
		return err
	}
	defer unix.Close(ro)
	if _, err := writableElsewhere(ro); err != nil {
		return fmt.Errorf("read lease: %w", err)
	}
	id, errno := server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(ro)})
	if errno != 0 {
		return fmt.Errorf("register a backing file: %w", errno)
	}
	if errno := server.UnregisterBackingFd(id); errno != 0 {
		return fmt.Errorf("unregister a backing file: %w", errno)
	}
	return nil
}

// reopenReadOnly opens the file open at fd again, read-only: the same
// inode, whatever its name is now.
func reopenReadOnly(fd int) (int, error) {
	ro, err := unix.Open("/proc/self/fd/"+itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, os.NewSyscallError("reopen read-only", err)
	}
	return ro, nil
}

// writableElsewhere reports whether the file open read-only at ro is open
// for writing anywhere on the system — by a descriptor or by a shared
// writable mapping. A read lease is refused (EAGAIN) exactly then; one
// granted is let go at once, so no writer ever waits on it for longer than
// two system calls.
func writableElsewhere(ro int) (bool, error) {
	_, err := unix.FcntlInt(uintptr(ro), unix.F_SETLEASE, unix.F_RDLCK)
	switch err {
	case nil:
		unix.FcntlInt(uintptr(ro), unix.F_SETLEASE, unix.F_UNLCK)
		return false, nil
	case unix.EAGAIN:
		return true, nil
	}
	return false, os.NewSyscallError("F_SETLEASE", err)
}
