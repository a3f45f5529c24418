//go:build !linux

package versionstore

import "os"

// keepACL: the platform has no POSIX ACLs to keep.
func keepACL(f *os.File, dirfd int, name string) error { return nil }
