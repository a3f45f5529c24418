package versionstore

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Target is a resolved workspace path.
type Target struct {
	// Key is the slash-separated workspace-relative path with every symlink
	// resolved ("." is the root). Aliases of one file share one key, and so
	// one lock, one index entry and one version.
	Key string
	// Display is the path shown in messages, as the caller wrote it.
	Display string
}

// maxSymlinks bounds symlink expansion, as the kernel's ELOOP does.
const maxSymlinks = 40

var errMissing = errors.New("missing")

// Resolve turns rel, a clean workspace-relative path ("." for the root, no
// ".." components), into a Target. Symlinks are followed inside the workspace;
// one pointing outside it is FS_SANDBOX_DENIED. A path that does not exist
// resolves through its nearest existing ancestor, so its key is stable across
// creation; a dangling symlink's key is the link itself. verb is the
// operation named in error messages.
func (s *Store) Resolve(rel, display, verb string) (Target, error) {
	t := Target{Display: display}
	if strings.IndexByte(rel, 0) >= 0 {
		return t, fail(ReasonNULByte, "resolve", display)
	}
	if !filepath.IsLocal(rel) && rel != "." {
		return t, fail(ReasonOutside, verb, display)
	}
	parts := splitPath(filepath.ToSlash(rel))
	key, err := s.walk(parts, verb, display)
	for i := len(parts) - 1; errors.Is(err, errMissing) && i >= 0; i-- {
		// Like realpath(3) failing with ENOENT: resolve the nearest
		// existing ancestor and append the missing names lexically.
		var base string
		base, err = s.walk(parts[:i], verb, display)
		if err == nil {
			key = path.Join(append([]string{base}, parts[i:]...)...)
		}
	}
	if err != nil {
		return t, err
	}
	t.Key = key
	return t, nil
}

// walk resolves parts to an existing path, following symlinks.
func (s *Store) walk(parts []string, verb, display string) (string, error) {
	var done []string
	links := 0
	for len(parts) > 0 {
		p := parts[0]
		parts = parts[1:]
		if p == ".." {
			if len(done) == 0 {
				return "", fail(ReasonOutside, verb, display)
			}
			done = done[:len(done)-1]
			continue
		}
		cand := path.Join(append(done, p)...)
		fi, err := s.root.Lstat(cand)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", errMissing
		case errors.Is(err, syscall.ENOTDIR):
			return "", fail(ReasonParentNotDir, "resolve", display)
		case err != nil:
			return "", osError("resolve", display, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if links++; links > maxSymlinks {
				return "", osError("resolve", display, syscall.ELOOP)
			}
			if s.protectedSymlink(path.Join(append([]string{"."}, done...)...), fi) {
				return "", osError(verb, display, syscall.EACCES)
			}
			target, err := s.root.Readlink(cand)
			if err != nil {
				return "", osError("resolve", display, err)
			}
			if filepath.IsAbs(target) {
				rel, ok := s.relToRoot(target)
				if !ok {
					return "", fail(ReasonOutside, verb, display)
				}
				done = nil
				target = rel
			}
			parts = append(splitPath(filepath.ToSlash(target)), parts...)
			continue
		}
		if !fi.IsDir() && len(parts) > 0 {
			return "", fail(ReasonParentNotDir, "resolve", display)
		}
		done = append(done, p)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

// protectedSymlink applies the kernel's protected_symlinks rule to the
// tools, which resolve paths themselves: a symlink in a sticky,
// world-writable directory (a shared /tmp-like one) is followed only if
// its owner is the follower (the daemon's user) or the directory's owner.
// Otherwise anyone who may create names there could send a tool through a
// link of theirs into a file of the daemon's user.
func (s *Store) protectedSymlink(dir string, link fs.FileInfo) bool {
	lst, ok := link.Sys().(*syscall.Stat_t)
	if !ok || int(lst.Uid) == s.euid {
		return false
	}
	dfi, err := s.root.Lstat(dir)
	if err != nil {
		return true // the directory moved under the walk: do not follow
	}
	dst, ok := dfi.Sys().(*syscall.Stat_t)
	sharedDir := dfi.Mode()&fs.ModeSticky != 0 && dfi.Mode().Perm()&0o002 != 0
	return ok && sharedDir && dst.Uid != lst.Uid
}

// relToRoot maps an absolute path to a workspace-relative one if it names
// something under one of the paths of the root.
func (s *Store) relToRoot(abs string) (string, bool) {
	abs = filepath.Clean(abs)
	for _, r := range s.roots {
		if rel, err := filepath.Rel(r, abs); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return rel, true
		}
	}
	return "", false
}

// RealPath resolves a relative path that may hold ".." segments, following
// symlinks the way the kernel does (a ".." applies to where a link led).
// The result must exist and stay inside the workspace.
func (s *Store) RealPath(rel string) (string, error) {
	if strings.IndexByte(rel, 0) >= 0 || filepath.IsAbs(rel) {
		return "", errMissing
	}
	return s.walk(splitPath(filepath.ToSlash(rel)), "resolve", rel)
}

// Roots lists the absolute paths that name the workspace root.
func (s *Store) Roots() []string { return append([]string(nil), s.roots...) }

// RelPath maps an absolute path under the workspace (its real path, the
// path it was opened with, or an alias root) to a clean relative path.
func (s *Store) RelPath(abs string) (string, bool) { return s.relToRoot(abs) }

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}
