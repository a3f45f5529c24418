package main

import (
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func detachMount(mnt string) error { return unix.Unmount(mnt, unix.MNT_FORCE) }

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TIOCGETA)
	return err == nil
}

// systemMounts: macOS has no mount table a process can read cheaply with
// the owner's uid; status lists the invoking user's mounts only.
func systemMounts() []systemMount { return nil }

// isFuse reports whether st describes a FUSE filesystem (macFUSE).
func isFuse(st *syscall.Statfs_t) bool {
	var name []byte
	for _, c := range st.Fstypename {
		if c == 0 {
			break
		}
		name = append(name, byte(c))
	}
	return strings.Contains(string(name), "fuse")
}

// capFileLimit is the most a soft descriptor limit may be. macOS's hard
// limit is often RLIM_INFINITY, which setrlimit refuses for the soft one:
// the cap is kern.maxfilesperproc, as Go's syscall package takes it, or
// OPEN_MAX (10240, <sys/syslimits.h>) where that cannot be read.
func capFileLimit(hard uint64) uint64 {
	n, err := unix.SysctlUint32("kern.maxfilesperproc")
	if err != nil {
		return min(hard, 10240)
	}
	return min(hard, uint64(n))
}
