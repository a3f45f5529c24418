package versionstore

import "golang.org/x/sys/unix"

// syncWorkspace makes everything written to the workspace's filesystem
// durable, in one call (syncfs): a merge's files and their directories.
func (s *Store) syncWorkspace() error {
	var err error
	if cerr := s.rootConn.Control(func(fd uintptr) { err = unix.Syncfs(int(fd)) }); cerr != nil {
		return cerr
	}
	return err
}
