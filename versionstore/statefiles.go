package versionstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// The index and the objects directory are reached by name (bbolt opens a
// path, objects are files under objects/), so a symbolic link put in their
// place would send the store's writes to whatever it names: an empty file
// of the user's would become an index, object files would land in another
// directory. The daemon refuses a state directory another user could
// change; these checks hold for any caller, and for links left there
// before. A link that appears after them needs write access to the state
// directory, which only its owner has.

// prepareIndexFile creates the index file at path if missing, without
// following a link, and refuses anything at path that is not a regular
// file, and an objects/ beside it that is not a directory.
func prepareIndexFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	// O_NONBLOCK: a FIFO put there must not hang the open.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("open index: %s is a symbolic link; the index must be a file of its own", path)
	}
	if err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("open index: %s is not a regular file", path)
	}
	return checkObjectsDir(filepath.Join(filepath.Dir(path), "objects"))
}

// checkObjectsDir refuses an objects directory that is a link or not a
// directory (a missing one is made when the first large object is kept).
func checkObjectsDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("open objects: %w", err)
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("open objects: %s is a symbolic link; the objects must be in a directory of their own", dir)
	case !fi.IsDir():
		return fmt.Errorf("open objects: %s is not a directory", dir)
	}
	return nil
}

// readObjectFile reads an object's file, not through a link.
func readObjectFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b := make([]byte, fi.Size())
	_, err = io.ReadFull(f, b)
	return b, err
}
