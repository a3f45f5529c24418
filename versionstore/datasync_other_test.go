//go:build !linux

package versionstore

import "os"

// datasync flushes f (no fdatasync here: a full fsync).
func datasync(f *os.File) error { return f.Sync() }
