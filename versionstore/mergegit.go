package versionstore

import (
	"errors"
	"io/fs"
	"sort"
)

// What a merge needs to bring a branch's git repositories across by git's
// rules rather than as files (the daemon decides; docs/branches.md, ".git/
// in a branch"): which of the workspace's paths changed since the branch
// point, whether a path exists, and how each repository was merged.

// GitMerge is how one of a branch's git repositories was merged.
type GitMerge struct {
	Repo        string `json:"repo"`             // its directory in the workspace: .git, sub/.git
	Commit      string `json:"commit,omitempty"` // the branch's HEAD commit
	FastForward bool   `json:"fast_forward"`     // HEAD, refs and index came across
	Ref         string `json:"ref,omitempty"`    // else the ref that keeps Commit in the workspace
	Why         string `json:"why,omitempty"`    // why it is not a fast-forward
}

// ChangedSince lists, sorted, the paths match accepts whose bytes now
// differ from their bytes at the checkpoint; a path whose bytes then are
// unknown counts as changed.
func (s *Store) ChangedSince(checkpoint string, match func(key string) bool) ([]string, error) {
	cp, err := s.findCheckpoint(checkpoint)
	if err != nil {
		return nil, err
	}
	first, err := s.journalSince(cp.Seq)
	if err != nil {
		return nil, err
	}
	var out []string
	for key, e := range first {
		if !match(key) {
			continue
		}
		now, err := s.versionNow(key)
		if err != nil {
			return nil, err
		}
		if e.PrevUnknown || now != e.Prev {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Exists reports whether the workspace has an entry at key (a symlink's
// own, never where it points).
func (s *Store) Exists(key string) (bool, error) {
	_, err := s.lstatKey(key)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
