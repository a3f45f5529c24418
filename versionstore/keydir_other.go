//go:build !linux

package versionstore

// openDir opens dir below root one element at a time, never following a
// symlink (see keydir.go); create makes the missing directories.
func openDir(root int, dir string, create bool, mode uint32) (int, error) {
	return walkDir(root, dir, create, mode)
}
