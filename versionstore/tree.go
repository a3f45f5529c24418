package versionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// The workspace's shape, for a replica that must rebuild it elsewhere: the
// journal names files and versions only, not directories (an empty one
// included), symlinks or permission bits. Tree describes them; Populate
// builds a workspace from such a description.

// The kinds of a TreeEntry.
const (
	TreeFile    = "file"
	TreeDir     = "dir"
	TreeSymlink = "symlink"
)

// TreeEntry is one path of the workspace.
type TreeEntry struct {
	Path string      `json:"path"` // slash-separated, relative to the root
	Type string      `json:"type"` // TreeFile, TreeDir or TreeSymlink
	Perm fs.FileMode `json:"perm,omitempty"`
	// Version is a file's version as the index knows it (zero: not known
	// yet, its bytes never read).
	Version Version `json:"version,omitzero"`
	Size    int64   `json:"size,omitempty"`
	Target  string  `json:"target,omitempty"` // a symlink's
}

// Tree describes the workspace: every directory, symlink and regular file
// below the root, sorted by path, the files with the version the index
// gives them; seq is the journal's last entry when the index was read
// (after the walk).
func (s *Store) Tree(ctx context.Context) (entries []TreeEntry, seq uint64, err error) {
	entries, err = s.walkTree(ctx)
	if err != nil {
		return nil, 0, err
	}
	s.flushPending()
	err = s.db.View(func(tx *bolt.Tx) error {
		seq = journalSeq(tx)
		for i, e := range entries {
			if e.Type != TreeFile {
				continue
			}
			if r, found, err := getRecord(tx, e.Path); err == nil && found {
				entries[i].Version = r.Version
			}
		}
		return nil
	})
	return entries, seq, err
}

// walkTree lists the workspace's entries; one removed meanwhile is left
// out.
func (s *Store) walkTree(ctx context.Context) ([]TreeEntry, error) {
	var out []TreeEntry
	err := filepath.WalkDir(s.rootPath, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == s.rootPath {
			return ctx.Err()
		}
		rel, _ := filepath.Rel(s.rootPath, p)
		fi, err := d.Info()
		if err != nil {
			return ctx.Err()
		}
		e := TreeEntry{Path: filepath.ToSlash(rel), Perm: fi.Mode().Perm()}
		switch {
		case d.IsDir():
			e.Type = TreeDir
		case d.Type()&fs.ModeSymlink != 0:
			e.Type, e.Perm = TreeSymlink, 0
			if e.Target, err = os.Readlink(p); err != nil {
				return ctx.Err()
			}
		case d.Type().IsRegular():
			e.Type, e.Size = TreeFile, fi.Size()
		default:
			return ctx.Err() // FIFOs, sockets, devices: not part of a history
		}
		out = append(out, e)
		return ctx.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("walk the workspace: %w", err)
	}
	return out, nil
}

// ErrNotEmptyDir is wrapped by the error of a Populate of a workspace that
// holds files already.
var ErrNotEmptyDir = errors.New("the directory is not empty")

// Populate builds the workspace entries describe in the store's root,
// which must be empty: directories first (with their permission bits once
// filled), then files with the bytes data gives for their version, then
// symlinks. A file whose bytes data cannot give (ErrNotKept, ErrCorrupt)
// is left out and named in missing; any other error stops it.
func (s *Store) Populate(entries []TreeEntry, data func(Version) ([]byte, error)) (missing []error, err error) {
	if names, err := os.ReadDir(s.rootPath); err != nil {
		return nil, fmt.Errorf("populate: %w", err)
	} else if len(names) > 0 {
		return nil, fmt.Errorf("populate %s: %w", s.rootPath, ErrNotEmptyDir)
	}
	entries = slices.Clone(entries)
	// A directory sorts before what it holds (its path is their prefix);
	// symlinks come last, so that no file or directory is made through
	// one (a symlink "a" to /etc and a file "a/passwd" must not write
	// /etc/passwd).
	slices.SortFunc(entries, func(a, b TreeEntry) int {
		if la, lb := a.Type == TreeSymlink, b.Type == TreeSymlink; la != lb {
			return cmpBool(la, lb)
		}
		return strings.Compare(a.Path, b.Path)
	})
	for _, e := range entries {
		if !filepath.IsLocal(filepath.FromSlash(e.Path)) {
			return missing, fmt.Errorf("populate %q: %w (not a path below the workspace)", e.Path, fs.ErrInvalid)
		}
		if miss, err := s.populateOne(e, data); err != nil {
			return missing, fmt.Errorf("populate %q: %w", e.Path, err)
		} else if miss != nil {
			missing = append(missing, miss)
		}
	}
	return missing, s.chmodDirs(entries)
}

func cmpBool(a, b bool) int {
	if a {
		return 1
	}
	return -1
}

// populateOne makes one entry; miss names a file whose bytes are not there.
func (s *Store) populateOne(e TreeEntry, data func(Version) ([]byte, error)) (miss, err error) {
	p := filepath.Join(s.rootPath, filepath.FromSlash(e.Path))
	if err := s.realDirs(filepath.Dir(p)); err != nil {
		return nil, err
	}
	switch e.Type {
	case TreeDir:
		return nil, s.realDirs(p) // its bits once it is filled
	case TreeSymlink:
		return nil, os.Symlink(e.Target, p)
	case TreeFile:
		b, err := data(e.Version)
		if errors.Is(err, ErrNotKept) || errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("%s at %s: %w", e.Path, e.Version.Short(), err), nil
		}
		if err != nil {
			return nil, err
		}
		return nil, writeFileSynced(p, b, permOr(e.Perm, 0o644))
	}
	return nil, fmt.Errorf("unknown type %q", e.Type)
}

// realDirs makes dir and its missing parents below the root, refusing to
// go through a symlink.
func (s *Store) realDirs(dir string) error {
	rel, err := filepath.Rel(s.rootPath, dir)
	if err != nil || rel == "." {
		return err
	}
	p := s.rootPath
	for _, name := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, name)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			err = os.Mkdir(p, 0o755)
		case err == nil && !fi.IsDir():
			err = fmt.Errorf("%s: %w (not a directory)", p, fs.ErrInvalid)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// permOr is p's permission bits, or def if it has none. A tree only
// records permission bits (walkTree): setuid, setgid and sticky bits from
// a bucket are dropped, so that a tampered tree cannot make a populate by
// root create a root-owned setuid executable.
func permOr(p, def fs.FileMode) fs.FileMode {
	if p.Perm() == 0 {
		return def
	}
	return p.Perm()
}

// writeFileSynced writes a new file with perm (the umask aside) and syncs it.
func writeFileSynced(p string, b []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// chmodDirs gives the directories their bits through a descriptor opened
// without following a symlink, deepest first (they sort
// before the symlinks, each after its parent): a directory without write
// permission is filled before it gets them.
func (s *Store) chmodDirs(entries []TreeEntry) error {
	for _, e := range slices.Backward(entries) {
		if e.Type != TreeDir {
			continue
		}
		perm := uint32(permOr(e.Perm, 0o755))
		err := s.inKeyDir(e.Path+"/", false, func(d keyDir) error { return unix.Fchmod(d.fd, perm) })
		if err != nil {
			return fmt.Errorf("populate %q: %w", e.Path, err)
		}
	}
	return nil
}
