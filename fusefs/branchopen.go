package fusefs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// errNotRegular is a layer's path that is no regular file (a symlink, a
// FIFO, a directory) where one was expected.
var errNotRegular = errors.New("not a regular file")

// openBeneath opens rel below the directory root one element at a time,
// following no symlink on the way or at the end: a layer's file is read
// where the layer holds it, never where a link planted in it (or a
// directory swapped for one) points.
func openBeneath(root, rel string, flags int) (*os.File, error) {
	fd, err := openBeneathFd(root, rel, flags)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}

// openBeneathFd is openBeneath's descriptor.
func openBeneathFd(root, rel string, flags int) (int, error) {
	dirfd, base, err := parentBeneath(root, rel)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat(dirfd, base, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return fd, nil
}

// lstatBeneath is the lstat of rel below root, as openBeneath finds it.
func lstatBeneath(root, rel string, st *unix.Stat_t) error {
	dirfd, base, err := parentBeneath(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	if err := unix.Fstatat(dirfd, base, st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "lstat", Path: rel, Err: err}
	}
	return nil
}

// parentBeneath opens the directory that holds rel below root, following
// no symlink, and names rel in it ("." is root itself).
func parentBeneath(root, rel string) (int, string, error) {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for _, p := range parts {
		if p == "" || p == ".." || p == "." && rel != "." {
			return -1, "", &os.PathError{Op: "open", Path: rel, Err: unix.EINVAL}
		}
	}
	fd, err := unix.Open(root, oPath|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", &os.PathError{Op: "open", Path: root, Err: err}
	}
	for _, p := range parts[:len(parts)-1] {
		next, err := unix.Openat(fd, p, oPath|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, "", &os.PathError{Op: "open", Path: rel, Err: err}
		}
		fd = next
	}
	return fd, parts[len(parts)-1], nil
}

// readRegular reads the regular file rel below root, as openBeneath finds
// it; anything else is errNotRegular (a FIFO is opened without blocking).
func readRegular(root, rel string) ([]byte, os.FileInfo, error) {
	f, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, &os.PathError{Op: "read", Path: rel, Err: errNotRegular}
	}
	data, err := io.ReadAll(f)
	return data, fi, err
}

// notReadable reports whether err is a path that readRegular refused as no
// regular file below its root: a symlink (ELOOP), a symlink or file where
// a directory was (ENOTDIR), or errNotRegular.
func notReadable(err error) bool {
	return errors.Is(err, errNotRegular) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)
}

// readlinkBeneath is the target of the symlink rel below root, as
// openBeneath finds it.
func readlinkBeneath(root, rel string) (string, error) {
	dirfd, base, err := parentBeneath(root, rel)
	if err != nil {
		return "", err
	}
	defer unix.Close(dirfd)
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirfd, base, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: rel, Err: err}
	}
	return string(buf[:n]), nil
}

// at is a name in an open directory of a layer. The view works on its
// layers' files relative to such a directory, opened one element at a time
// (parentBeneath): a path of any length below a layer works, as it does
// below the workspace, though the layer itself lies deeper.
type at struct {
	dir  int
	name string
}

// atBeneath opens the directory holding rel below root.
func atBeneath(root, rel string) (at, error) {
	fd, base, err := parentBeneath(root, rel)
	return at{dir: fd, name: base}, err
}

func (a at) close() { unix.Close(a.dir) }

// lstatInfo is lstatBeneath as an os.FileInfo.
func lstatInfo(root, rel string) (os.FileInfo, error) {
	fd, err := openBeneathFd(root, rel, oPath)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return f.Stat()
}
