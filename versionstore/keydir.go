package versionstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Every operation on a key's file — stat, open, create, link, rename,
// remove — goes through the descriptor of the directory that holds it,
// opened from the workspace root without following a symlink on the way
// (openDir, per platform). os.Root keeps paths inside the workspace, but it
// follows the links that stay inside: a directory the journal knows,
// replaced by a link to another user's directory — or swapped with one by
// RENAME_EXCHANGE while a rewind runs — would send a removal, a restore or
// a read there. A key has every link resolved already, so a link (or a
// file) where a directory of the key should be means the key's file is
// gone from where it was: the operation is refused, never redirected. The
// temp file of a publish is created, linked or renamed, and removed
// relative to that same descriptor, so it cannot land in one directory and
// be published or cleaned up in another.

// keyDir is the open directory of a key's file.
type keyDir struct {
	fd   int
	key  string
	name string // the key's last element
}

// inKeyDir opens the directory of key, creating the missing ones (mode
// s.dirMode) if create, and runs fn on it. A directory on the way that is
// now a symlink or not a directory fails with an error that is
// syscall.ENOTDIR; a missing one with fs.ErrNotExist.
func (s *Store) inKeyDir(key string, create bool, fn func(d keyDir) error) error {
	dir, name := path.Split(key)
	var ferr error
	err := s.rootConn.Control(func(root uintptr) {
		d := keyDir{fd: int(root), key: key, name: name}
		if dir != "" {
			fd, err := openDir(int(root), dir, create, uint32(s.dirMode))
			if err != nil {
				if errors.Is(err, syscall.ELOOP) {
					err = syscall.ENOTDIR // a link on the way
				}
				ferr = &fs.PathError{Op: "open", Path: path.Clean(dir), Err: err}
				return
			}
			defer unix.Close(fd)
			d.fd = fd
		}
		ferr = fn(d)
	})
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	return ferr
}

// walkDir opens dir below root one element at a time, never following a
// symlink, making the missing elements if create.
func walkDir(root int, dir string, create bool, mode uint32) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, at := root, "."
	for _, c := range splitPath(dir) {
		if c == ".." {
			return -1, syscall.EXDEV // never in a key: refuse to leave the root
		}
		next, err := unix.Openat(fd, c, flags, 0)
		if errors.Is(err, syscall.ENOENT) && create {
			if err = mkdirSynced(fd, at, c, mode); err == nil {
				next, err = unix.Openat(fd, c, flags, 0)
			}
		}
		at = path.Join(at, c)
		if fd != root {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	if fd == root {
		return unix.Openat(root, ".", flags, 0)
	}
	return fd, nil
}

// mkdirSynced makes the directory name in parent (at, for tracing) and
// syncs parent, so the new directory, and what is published in it later,
// cannot vanish with a power cut. One that a concurrent publish just made
// is synced too: its maker may not have synced it yet.
func mkdirSynced(parent int, at, name string, mode uint32) error {
	if err := unix.Mkdirat(parent, name, mode); err != nil && !errors.Is(err, syscall.EEXIST) {
		return err
	}
	err := unix.Fsync(parent)
	traced("sync", at, err)
	return err
}

func (d keyDir) err(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: path.Join(path.Dir(d.key), name), Err: err}
}

// uid is the user who owns d itself.
func (d keyDir) uid() (uint32, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return 0, d.err("stat", ".", err)
	}
	return st.Uid, nil
}

// lstat stats name in d, not following a symlink.
func (d keyDir) lstat(name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, d.err("lstat", name, err)
	}
	return &statInfo{name: name, st: st}, nil
}

// open opens name in d; a symlink is never followed (ELOOP).
func (d keyDir) open(name string, flag int, perm fs.FileMode) (*os.File, error) {
	fd, err := unix.Openat(d.fd, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, d.err("open", name, err)
	}
	return os.NewFile(uintptr(fd), path.Join(path.Dir(d.key), name)), nil
}

func (d keyDir) remove(name string) error {
	return d.err("remove", name, unix.Unlinkat(d.fd, name, 0))
}

func (d keyDir) link(from, to string) error {
	err := unix.Linkat(d.fd, from, d.fd, to, 0)
	traced("link", d.key, err)
	return d.err("link", to, err)
}

func (d keyDir) rename(from, to string) error {
	err := unix.Renameat(d.fd, from, d.fd, to)
	traced("rename", d.key, err)
	return d.err("rename", to, err)
}

// sync makes the entries of d durable: a name linked or renamed into it
// survives a power cut once this returns.
func (d keyDir) sync() error {
	if benchNoDirSync {
		return nil
	}
	err := unix.Fsync(d.fd)
	traced("sync", dirName(path.Dir(d.key)), err)
	return d.err("sync", ".", err)
}

func dirName(dir string) string {
	if dir == "" {
		return "."
	}
	return path.Clean(dir)
}

// benchNoDirSync, set by a benchmark, skips the directory sync of a
// publish, to measure what it costs.
var benchNoDirSync bool

// traceSync, set by tests, is told of each link, rename and directory sync
// of a publish, in order, with the key or directory concerned.
var traceSync func(op, name string)

func traced(op, name string, err error) {
	if traceSync != nil && err == nil {
		traceSync(op, name)
	}
}

// lstatKey is the lstat of key's file.
func (s *Store) lstatKey(key string) (fi fs.FileInfo, err error) {
	err = s.inKeyDir(key, false, func(d keyDir) error {
		fi, err = d.lstat(d.name)
		return err
	})
	return fi, err
}

// openKey opens key's file; a symlink is never followed.
func (s *Store) openKey(key string, flag int) (f *os.File, err error) {
	err = s.inKeyDir(key, false, func(d keyDir) error {
		f, err = d.open(d.name, flag, 0)
		return err
	})
	return f, err
}

// removeKey removes t's file if it still has fingerprint fp
// (FS_STALE_VERSION otherwise): the look and the unlink go through one
// directory descriptor, so what is removed is what was looked at.
func (s *Store) removeKey(t Target, fp fingerprint) error {
	return s.inKeyDir(t.Key, false, func(d keyDir) error {
		if fi, err := d.lstat(d.name); err != nil || fingerprintOf(fi) != fp {
			return fail(ReasonChanged, "restore", t.Display)
		}
		if err := d.remove(d.name); err != nil {
			return osError("remove", t.Display, err)
		}
		return nil
	})
}

// statInfo is an fs.FileInfo from fstatat(2).
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (fi *statInfo) Name() string       { return fi.name }
func (fi *statInfo) Size() int64        { return fi.st.Size }
func (fi *statInfo) IsDir() bool        { return fi.Mode().IsDir() }
func (fi *statInfo) Sys() any           { return &fi.st }
func (fi *statInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }

// Mode converts st_mode as the os package does.
func (fi *statInfo) Mode() fs.FileMode {
	m := uint32(fi.st.Mode)
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
