package toolapi

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dshfs/dshfs/versionstore"
)

// dotDotSegment is the reference implementation's test for a ".." path segment.
var dotDotSegment = regexp.MustCompile(`(?:^|[\\/])\.\.(?:[\\/]|$)`)

// resolve turns a tool's file_path into a target. A relative path resolves
// against cwd (default: the mount point); an absolute one may name the mount
// point or the backing directory. The display path is always under the mount
// point, which is what the agent's shell sees. Anything outside the
// workspace, lexically or through a symlink, is FS_SANDBOX_DENIED.
func (s *Service) resolve(cwd, filePath, verb string) (versionstore.Target, error) {
	if err := checkPathLength("file_path", filePath); err != nil {
		return versionstore.Target{}, err
	}
	if err := checkPathLength("cwd", cwd); err != nil {
		return versionstore.Target{}, err
	}
	base, err := s.cwdDisplay(cwd)
	if err != nil {
		return versionstore.Target{}, err
	}
	if dotDotSegment.MatchString(cwd) || dotDotSegment.MatchString(filePath) {
		// The reference implementation canonicalises the session cwd when ".."
		// is involved, so "../x" from a symlinked directory means what the
		// shell means.
		base = s.realDisplay(cwd, base)
	}
	display := filePath
	if !filepath.IsAbs(display) {
		display = filepath.Join(base, display)
	}
	display = filepath.Clean(display)
	rel, ok := s.relOf(display)
	if !ok {
		return versionstore.Target{Display: display}, errOutside(verb, display)
	}
	return s.store.Resolve(rel, s.displayOf(rel), verb)
}

// cwdDisplay validates a request's cwd and expresses it under the mount point.
func (s *Service) cwdDisplay(cwd string) (string, error) {
	if cwd == "" {
		return s.mount, nil
	}
	if !filepath.IsAbs(cwd) {
		return "", argError(`cwd "` + cwd + `" must be an absolute path inside the workspace`)
	}
	rel, ok := s.relOf(filepath.Clean(cwd))
	if !ok {
		return "", argError(`cwd "` + cwd + `" is outside the workspace`)
	}
	return s.displayOf(rel), nil
}

// realDisplay is realpath(cwd) expressed under the mount point: symlinks
// resolved inside the workspace, and a ".." in cwd applied after the symlink
// before it, as the kernel does. It returns base if that fails.
func (s *Service) realDisplay(cwd, base string) string {
	rel, ok := s.relOf(base)
	if cwd != "" {
		rel, ok = s.relUnclean(cwd)
	}
	if !ok {
		return base
	}
	key, err := s.store.RealPath(rel)
	if err != nil {
		return base
	}
	return s.displayOf(key)
}

// relUnclean maps an absolute path under the mount point or the backing
// directory to a relative one, keeping its ".." segments for the resolver.
func (s *Service) relUnclean(abs string) (string, bool) {
	if rel, ok := relUnder(abs, append([]string{s.mount}, s.store.Roots()...)); ok {
		return rel, true
	}
	return relUnder(abs, s.otherMountPoints())
}

// relUnder is abs relative to the first of roots it is under, keeping its
// ".." segments.
func relUnder(abs string, roots []string) (string, bool) {
	for _, root := range roots {
		if rest, ok := strings.CutPrefix(abs, root); ok && (rest == "" || rest[0] == '/') {
			return strings.TrimLeft(rest, "/"), true
		}
	}
	return "", false
}

// otherMountPoints are the other places the mount is shown (Config).
func (s *Service) otherMountPoints() []string {
	if s.cfg.OtherMountPoints == nil {
		return nil
	}
	return s.cfg.OtherMountPoints()
}

// relOf maps an absolute, clean path under the mount point or the backing
// directory to a workspace-relative one.
func (s *Service) relOf(abs string) (string, bool) {
	if rel, err := filepath.Rel(s.mount, abs); err == nil && (rel == "." || filepath.IsLocal(rel)) {
		return rel, true
	}
	if rel, ok := s.store.RelPath(abs); ok {
		return rel, true
	}
	for _, m := range s.otherMountPoints() {
		if rel, err := filepath.Rel(m, abs); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return rel, true
		}
	}
	return "", false
}

func (s *Service) displayOf(rel string) string {
	return filepath.Join(s.mount, filepath.FromSlash(rel))
}

// Resolve resolves path as the tools do, for callers that ask about a file
// rather than run a tool on it (history). verb is "read".
func (s *Service) Resolve(cwd, path string) (versionstore.Target, error) {
	if strings.TrimSpace(path) == "" {
		return versionstore.Target{}, argError("file_path must be a non-empty string")
	}
	t, err := s.resolve(cwd, path, "read")
	return t, describe("read", err)
}

// Keys resolves paths as the tools do (relative to cwd) to the store's
// keys, for the operations that take paths rather than act on one file
// (rewind, the session's log and diff). No paths: none.
func (s *Service) Keys(cwd string, paths []string) ([]string, error) {
	var keys []string
	for _, p := range paths {
		t, err := s.Resolve(cwd, p)
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.Key)
	}
	return keys, nil
}
