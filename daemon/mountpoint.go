package daemon

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// recoverStaleMount detaches a FUSE mount whose daemon died, and reports
// whether there was one: the kernel answers ENOTCONN for it, and nothing
// can be mounted over it until it goes.
func recoverStaleMount(mnt string) (bool, error) {
	// statfs always asks the filesystem; a stat of the mount point may be
	// answered from the kernel's cache of a dead mount.
	var st syscall.Statfs_t
	err := syscall.Statfs(mnt, &st)
	if !errors.Is(err, syscall.ENOTCONN) {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("mount point: %w", err)
		}
		return false, nil
	}
	if err := detachMount(mnt); err != nil {
		return false, fmt.Errorf("mount point %s is a dead mount and could not be detached: %w", mnt, err)
	}
	return true, nil
}

// notMounted refuses a mount point that already has a filesystem mounted
// on it (a running dshfs, say): a second mount would hide the first, whose
// tools would then change files nobody sees, and whose unmount would hang.
// Only a FUSE filesystem's root is refused: the root of a tmpfs or another
// disk is a fine place to mount on.
func notMounted(mnt string) error {
	var st, parent syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	if err := syscall.Stat(filepath.Dir(mnt), &parent); err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	var fsst syscall.Statfs_t
	if err := syscall.Statfs(mnt, &fsst); err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	if st.Dev != parent.Dev && mnt != filepath.Dir(mnt) && isFuse(&fsst) {
		return fmt.Errorf("mount point %s is already a mount point (a FUSE filesystem); unmount it first", mnt)
	}
	return nil
}

// MountPoint is a mount point PrepareMountPoint checked.
type MountPoint struct {
	Path     string   // its real path
	Made     []string // the directories made for it, the mount point first
	Replaced bool     // a dead mount (its daemon gone) was detached from it
}

// Unmake removes the directories made for the mount point, once a mount
// on it has failed: a failed mount leaves nothing behind to cd into and
// write to as if it were the mount. A directory that holds something by
// then is left.
func (m MountPoint) Unmake() {
	for _, dir := range m.Made {
		if os.Remove(dir) != nil {
			return
		}
	}
}

// PrepareMountPoint checks the mount point before anything is mounted on
// it: a dead mount left there is detached, a missing directory is made
// (and removed again if a later check fails), and one that is inside the
// backing directory, already a FUSE mount, or (unless nonempty) holds
// files is refused.
func PrepareMountPoint(backing, mountpoint string, nonempty bool) (MountPoint, error) {
	mnt, err := filepath.Abs(mountpoint)
	if err != nil {
		return MountPoint{}, err
	}
	m := MountPoint{Path: mnt}
	if within(backing, mnt) {
		return m, fmt.Errorf("mount point %s is inside the backing directory %s; choose a mount point outside it", mnt, backing)
	}
	if m.Replaced, err = recoverStaleMount(mnt); err != nil {
		return m, err
	}
	if m.Made, err = makeDirs(mnt); err != nil {
		return m, fmt.Errorf("make the mount point: %w", err)
	}
	if real, err := filepath.EvalSymlinks(mnt); err == nil {
		mnt = real // registered, and listed by the kernel, under its real path
	}
	m.Path = mnt
	if err := checkMountPoint(mnt, nonempty); err != nil {
		m.Unmake()
		m.Made = nil
		return m, err
	}
	return m, nil
}

// makeDirs makes dir and the directories missing above it, and returns
// those it made, dir first.
func makeDirs(dir string) ([]string, error) {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) || p == filepath.Dir(p) {
			break
		}
		missing = append(missing, p)
	}
	if len(missing) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		MountPoint{Made: missing}.Unmake()
		return nil, err
	}
	return missing, nil
}

// checkMountPoint refuses a mount point that is already a FUSE mount, is
// no directory, or (unless nonempty) holds files.
func checkMountPoint(mnt string, nonempty bool) error {
	if err := notMounted(mnt); err != nil {
		return err
	}
	if fi, err := os.Stat(mnt); err != nil || !fi.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", mnt)
	}
	if !nonempty {
		return checkEmpty(mnt)
	}
	return nil
}

// BackingDir is the real path of the backing directory: the mount is
// registered, and found by the CLI, under it.
func BackingDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return "", fmt.Errorf("backing directory %s is a file, not a directory; mount the directory that holds it (%s)", dir, filepath.Dir(abs))
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("backing directory %s: no such directory; make it first (mkdir -p %s)", dir, dir)
	case errors.Is(err, syscall.ENOTDIR):
		return "", fmt.Errorf("backing directory %s: no such directory (%s is a file)", dir, fileOnTheWay(abs))
	case err != nil:
		return "", fmt.Errorf("backing directory %s: %w", dir, errors.Unwrap(err))
	}
	return abs, nil
}

// fileOnTheWay is the element of path, missing as a directory because a
// file is on its way, that is that file.
func fileOnTheWay(path string) string {
	for p := filepath.Dir(path); p != filepath.Dir(p); p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return path
}

// checkEmpty refuses a mount point that holds files: the mount would hide
// them until it is unmounted.
func checkEmpty(mnt string) error {
	d, err := os.Open(mnt)
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(3)
	if err != nil && err != io.EOF {
		return fmt.Errorf("mount point: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	if len(names) == 3 {
		names[2] = "…"
	}
	return fmt.Errorf("mount point %s is not empty (it holds %s), and the mount would hide what it holds; choose an empty directory, or pass --nonempty to mount over it", mnt, strings.Join(names, ", "))
}
