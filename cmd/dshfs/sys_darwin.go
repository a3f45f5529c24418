package main

import (
	"os"

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
