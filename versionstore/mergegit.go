package versionstore

import (
	"context"
	"errors"
	"io/fs"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// What a merge needs to bring a branch's git repositories across by git's
// rules rather than as files (the daemon decides; docs/branches.md, ".git/
// in a branch"): which of the workspace's paths changed since the branch
// point, whether a path exists, and how each repository was merged. A
// rewind of a merge leaves the git objects the merge brought: they are
// named by their content, and a commit made since may need them.

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
	s.settleOwed(match)
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

// settleOwed waits, up to MergeWriterGrace, for the files match accepts
// that are being written with a change not recorded yet to be let go: with
// kernel passthrough a change is recorded at the release, which comes after
// the writer's close(2) has returned (git's rename of index.lock may come
// first).
func (s *Store) settleOwed(match func(key string) bool) {
	deadline := time.Now().Add(MergeWriterGrace)
	for time.Now().Before(deadline) {
		owed := s.mount.owed()
		i := slices.IndexFunc(owed, match)
		if i < 0 {
			return
		}
		s.mount.awaitWriters(context.Background(), owed[i])
	}
}

// Exists reports whether the workspace has an entry at key (a symlink's
// own, never where it points); a file where a directory above key would be
// is no entry at key.
func (s *Store) Exists(key string) (bool, error) {
	_, err := s.lstatKey(key)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return false, nil
	}
	return err == nil, err
}

var (
	gitLooseObject = regexp.MustCompile(`^objects/[0-9a-f]{2}/([0-9a-f]{38}|[0-9a-f]{62})$`)
	gitPackFile    = regexp.MustCompile(`^objects/pack/pack-([0-9a-f]{40}|[0-9a-f]{64})\.(pack|idx|rev|bitmap|keep|promisor|mtimes)$`)
	gitSharedIndex = regexp.MustCompile(`^sharedindex\.([0-9a-f]{40}|[0-9a-f]{64})$`)
)

// GitPath splits key into its git repository's directory (.git, sub/.git)
// and its path there; ok is false for a key in no repository's directory.
func GitPath(key string) (repo, rel string, ok bool) {
	elems := strings.Split(key, "/")
	for i := 0; i < len(elems)-1; i++ {
		if elems[i] == ".git" {
			return strings.Join(elems[:i+1], "/"), strings.Join(elems[i+1:], "/"), true
		}
	}
	return "", "", false
}

// GitObject reports whether rel, a path in a repository's directory, is
// named by its content: a loose object, a pack's file, a split index's.
func GitObject(rel string) bool {
	return gitLooseObject.MatchString(rel) || gitPackFile.MatchString(rel) || gitSharedIndex.MatchString(rel)
}

// keepMergedObjects leaves out of a rewind of a merge's step the git
// objects the merge made.
func keepMergedObjects(steps map[string]*actorStep) {
	for key, st := range steps {
		if _, rel, ok := GitPath(key); ok && GitObject(rel) && st.first.Prev.IsZero() {
			delete(steps, key)
		}
	}
}
