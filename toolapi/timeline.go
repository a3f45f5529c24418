package toolapi

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	cquote "github.com/dshfs/dshfs/internal/quote" // toolapi has its own quote, the reference implementation's
	"github.com/dshfs/dshfs/versionstore"
)

// The people-facing side of versions — show, diff and restore a file's
// versions — over the same path resolution as the tools: a path is taken
// relative to cwd, inside the workspace, shown as the agent sees it.
// Checkpoints, rewind and collection take no path and are the store's own.

// ErrBadVersion is wrapped by errors for a version argument that names no
// version of the file.
var ErrBadVersion = errors.New("no such version")

// ErrTooFewVersions is wrapped by errors for a diff of a file with fewer
// than two versions.
var ErrTooFewVersions = errors.New("nothing to compare")

// FileVersion is one version of a file, found by a version argument.
type FileVersion struct {
	Path    string               `json:"path"`
	Version versionstore.Version `json:"version"`
}

// History returns the versions of path, newest first. The file is looked
// at first (versionstore's Look), so a change made behind dshfs's back is
// its newest version, as it is for show, diff and restore.
func (s *Service) History(cwd, path string) ([]versionstore.HistoryEntry, error) {
	t, err := s.Resolve(cwd, path)
	if err != nil {
		return nil, err
	}
	return s.history(t, "list the versions of")
}

// history is t's versions, once the file has been looked at for verb. The
// store fails only when the index cannot be read, which is said as the
// other store failures are, naming the file: the file's entry for verb, its
// history as the versions it could not list.
func (s *Service) history(t versionstore.Target, verb string) ([]versionstore.HistoryEntry, error) {
	const r = versionstore.ReasonIndexRead
	if err := s.store.Look(t.Key); err != nil {
		return nil, describe(verb, &versionstore.Error{Code: r.Code(), Reason: r, Op: verb, Path: t.Display, Err: err})
	}
	h, err := s.store.History(t.Key)
	if err != nil {
		const op = "list the versions of"
		return nil, describe(op, &versionstore.Error{Code: r.Code(), Reason: r, Op: op, Path: t.Display, Err: err})
	}
	return h, nil
}

// Show returns the bytes of path at version, which is a full version
// (b3:…), or a prefix of the hex of one in the path's history.
func (s *Service) Show(cwd, path, version string) ([]byte, FileVersion, error) {
	t, v, err := s.fileVersion(cwd, path, version, "show")
	if err != nil {
		return nil, FileVersion{}, err
	}
	data, err := s.store.Object(v)
	return data, FileVersion{t.Display, v}, err
}

// Diff writes to w the unified diff of path between two versions, cut at
// maxBytes (0: all of it): from and to as Show takes them; with to empty,
// from against the newest version; with both empty, the two newest. A
// deletion diffs as an empty file. Nothing is written when the versions
// cannot be found; the diff waits for a free slot (MaxConcurrentDiffs)
// for as long as ctx lasts.
func (s *Service) Diff(ctx context.Context, w io.Writer, cwd, path, from, to string, maxBytes int) error {
	t, a, b, err := s.diffVersions(cwd, path, from, to)
	if err != nil {
		return err
	}
	side := func(v versionstore.Version) ([]byte, string, error) {
		if v.IsZero() {
			return nil, "/dev/null", nil
		}
		data, err := s.store.Object(v)
		return data, cquote.Name(t.Display + "@" + v.Short()), err
	}
	cw := newCutWriter(w, maxBytes)
	err = s.inDiffSlot(ctx, func() error {
		da, na, err := side(a)
		if err != nil {
			return err
		}
		db, nb, err := side(b)
		if err != nil {
			return err
		}
		return writeUnified(cw, na, nb, da, db)
	})
	return endCut(w, cw, err, 0, 0)
}

// diffVersions picks the versions Diff compares.
func (s *Service) diffVersions(cwd, path, from, to string) (t versionstore.Target, a, b versionstore.Version, err error) {
	if t, err = s.Resolve(cwd, path); err != nil {
		return t, a, b, err
	}
	h, err := s.history(t, "diff")
	if err != nil {
		return t, a, b, err
	}
	switch {
	case from == "" && to != "":
		return t, a, b, fmt.Errorf("diff: a second version needs a first")
	case from == "":
		var ok bool
		if a, b, ok = latestChange(h); !ok {
			return t, a, b, fmt.Errorf("%s has %d version(s): %w", t.Display, len(h), ErrTooFewVersions)
		}
		return t, a, b, nil
	}
	if a, err = pickVersion(t, h, from); err != nil {
		return t, a, b, err
	}
	switch {
	case to != "":
		b, err = pickVersion(t, h, to)
	case len(h) == 0:
		err = fmt.Errorf("%s has no versions: %w", t.Display, ErrTooFewVersions)
	default:
		b = h[0].Version
	}
	return t, a, b, err
}

// Restore makes version the content of path again, as a guarded write
// recorded in history as a restore by actor.
func (s *Service) Restore(ctx context.Context, cwd, path, version, actor string) (versionstore.RestoreResult, FileVersion, error) {
	if err := CheckActor(actor); err != nil {
		return versionstore.RestoreResult{}, FileVersion{}, err
	}
	t, v, err := s.fileVersion(cwd, path, version, "restore")
	if err != nil {
		return versionstore.RestoreResult{}, FileVersion{}, err
	}
	res, err := s.store.Restore(ctx, t, v, versionstore.Writer{Kind: versionstore.WriterRestore, Actor: actor})
	return res, FileVersion{t.Display, v}, describe("restore", err)
}

// latestChange picks the versions a plain `dshfs diff PATH` compares: the
// newest (a deletion, if the file is gone) against the content it replaced.
// A deletion in between is skipped: an editor's or git's save renames the
// file away and writes it anew, and the diff is of the content, not of a
// moment without a file.
func latestChange(h []versionstore.HistoryEntry) (from, to versionstore.Version, ok bool) {
	if len(h) == 0 {
		return from, to, false
	}
	to = h[0].Version
	for _, e := range h[1:] {
		if !e.Version.IsZero() && e.Version != to {
			return e.Version, to, true
		}
	}
	return from, to, false
}

func (s *Service) fileVersion(cwd, path, version, verb string) (versionstore.Target, versionstore.Version, error) {
	t, err := s.Resolve(cwd, path)
	if err != nil {
		return t, versionstore.Version{}, err
	}
	h, err := s.history(t, verb)
	if err != nil {
		return t, versionstore.Version{}, err
	}
	v, err := pickVersion(t, h, version)
	return t, v, err
}

// pickVersion finds the version an argument names: a full b3: version, or
// a unique prefix (at least 4 hex digits, "b3:" optional) of one in h.
func pickVersion(t versionstore.Target, h []versionstore.HistoryEntry, arg string) (versionstore.Version, error) {
	if v, err := versionstore.ParseVersion(arg); err == nil && !v.IsZero() {
		return v, nil
	}
	prefix := strings.ToLower(strings.TrimPrefix(arg, "b3:"))
	if _, err := hex.DecodeString(prefix + strings.Repeat("0", len(prefix)%2)); err != nil || len(prefix) < 4 {
		return versionstore.Version{}, fmt.Errorf("%q is not a version: give b3:<hex>, or at least 4 hex digits of one", arg)
	}
	var found []versionstore.Version
	for _, e := range h {
		if hx := hex.EncodeToString(e.Version[:]); !e.Version.IsZero() && strings.HasPrefix(hx, prefix) && !containsVersion(found, e.Version) {
			found = append(found, e.Version)
		}
	}
	switch len(found) {
	case 0:
		return versionstore.Version{}, fmt.Errorf("%w: %s in the history of %s", ErrBadVersion, arg, t.Display)
	case 1:
		return found[0], nil
	}
	return versionstore.Version{}, fmt.Errorf("version %s is ambiguous in the history of %s: %d versions start with it", arg, t.Display, len(found))
}

func containsVersion(vs []versionstore.Version, v versionstore.Version) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}
