package versionstore

import (
	"os"
	"syscall"
)

// datasync flushes f's data (and its size), not its times: what a journal
// append needs.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
