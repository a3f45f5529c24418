//go:build !linux

package versionstore

import "golang.org/x/sys/unix"

// syncWorkspace makes everything written to the workspace durable: a
// merge's files and their directories. Without syncfs, all filesystems.
func (s *Store) syncWorkspace() error {
	unix.Sync()
	return nil
}
