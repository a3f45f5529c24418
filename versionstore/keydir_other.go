//go:build !linux

package versionstore

import "time"

// openDir opens dir below root one element at a time, never following a
// symlink (see keydir.go); create makes the missing directories.
func openDir(root int, dir string, create bool, mode uint32) (int, error) {
	return walkDir(root, dir, create, mode)
}

// bornAt is the birth time of a file where the platform tells it; here it
// is not asked for (ok false).
func bornAt(dirfd int, name string) (born time.Time, ok bool) { return time.Time{}, false }
