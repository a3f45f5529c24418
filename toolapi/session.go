package toolapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	cquote "github.com/dshfs/dshfs/internal/quote" // toolapi has its own quote, the reference implementation's
	"github.com/dshfs/dshfs/versionstore"
)

// A session's changes as one review, for the person checking what an agent
// did: the workspace's log, and one diff of everything changed since a
// checkpoint or a time — tools, shells, editors and writes behind dshfs's
// back alike.

// SessionQuery selects a stretch of the workspace's changes.
type SessionQuery struct {
	// Since is a checkpoint's name, a time (RFC 3339, or "2006-01-02
	// 15:04" local), or a duration back from now ("30m"); empty: all.
	Since string
	// Paths limits the changes to these paths and below, as a tool takes
	// them (relative to Cwd).
	Paths []string
	Cwd   string
	// Limit bounds the number of log entries (0: no bound).
	Limit int
	// Exclude leaves out of a session diff the paths a pattern matches
	// (versionstore.Excluded, as a rewind takes them).
	Exclude []string
	// Git puts a git repository's own files (.git/) in a session diff:
	// left out unless asked for, they are binary or an index git rewrites,
	// and no patch could apply them.
	Git bool
}

// ErrBadSince is wrapped by errors for a Since that names no checkpoint and
// is no time.
var ErrBadSince = errors.New("not a checkpoint or a time")

// query turns q into the store's terms.
func (s *Service) query(q SessionQuery) (versionstore.ChangeQuery, error) {
	keys, err := s.Keys(q.Cwd, q.Paths)
	if err != nil {
		return versionstore.ChangeQuery{}, err
	}
	cq := versionstore.ChangeQuery{Paths: keys, Limit: q.Limit}
	if q.Since == "" {
		return cq, nil
	}
	if cp, err := s.store.FindCheckpoint(q.Since); err == nil {
		cq.After = cp.Seq
		return cq, nil
	}
	if d, err := time.ParseDuration(q.Since); err == nil && d > 0 {
		cq.Since = time.Now().Add(-d)
		return cq, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, q.Since, time.Local); err == nil {
			cq.Since = t
			return cq, nil
		}
	}
	return cq, fmt.Errorf("since %q: %w (give a checkpoint's name, a time such as 2006-01-02 15:04, or a duration such as 30m)", q.Since, ErrBadSince)
}

// Log lists the workspace's changes q selects, newest first. Once the whole
// workspace has been indexed (by a checkpoint), it is looked over first, so
// changes made behind dshfs's back show too.
func (s *Service) Log(ctx context.Context, q SessionQuery) ([]versionstore.Change, error) {
	cq, err := s.query(q)
	if err != nil {
		return nil, err
	}
	if err := s.syncIfIndexed(ctx); err != nil {
		return nil, err
	}
	return s.store.Changes(cq)
}

func (s *Service) syncIfIndexed(ctx context.Context) error {
	base, err := s.store.Baselined()
	if err != nil || !base {
		return describe("sync", err)
	}
	_, err = s.store.Sync(ctx, nil)
	return describe("sync", err)
}

// SessionDiff writes to w one unified diff of every file changed over the
// stretch q selects, in path order, with paths relative to the workspace
// (a/ before, b/ after): edits, creations, deletions and renames. Binary
// files and files whose bytes are not kept are named, not shown. Nothing
// is written when q is bad. It is written file by file, each file's diff
// in a diff slot (MaxConcurrentDiffs), and it stops being computed at
// maxBytes (0: no bound).
func (s *Service) SessionDiff(ctx context.Context, w io.Writer, q SessionQuery, maxBytes int) error {
	cq, err := s.query(q)
	if err != nil {
		return err
	}
	if err := s.syncIfIndexed(ctx); err != nil {
		return err
	}
	changed, err := s.store.Changed(cq)
	if err != nil {
		return err
	}
	changes := leaveOut(pairRenames(changed), q)
	cw := newCutWriter(w, maxBytes)
	for i, fc := range changes {
		if err := s.fileDiff(ctx, cw, fc); err != nil {
			return endCut(w, cw, err, len(changes)-i, len(changes))
		}
	}
	return endCut(w, cw, nil, 0, len(changes))
}

// pairRenames folds a file renamed away and the file it became into one
// change, from the old path to the new.
func pairRenames(changed []versionstore.FileChange) []versionstore.FileChange {
	idx := map[string]int{}
	for i, fc := range changed {
		idx[fc.Path] = i
	}
	merged := map[int]bool{}
	out := make([]versionstore.FileChange, 0, len(changed))
	for _, fc := range changed {
		if j, ok := idx[fc.From]; ok && fc.Before.IsZero() && changed[j].After.IsZero() && changed[j].To == fc.Path {
			fc.Before, fc.BeforeUnknown = changed[j].Before, changed[j].BeforeUnknown
			merged[j] = true
		} else {
			fc.From = ""
		}
		out = append(out, fc)
	}
	kept := out[:0]
	for i, fc := range out {
		if !merged[i] {
			kept = append(kept, fc)
		}
	}
	return kept
}

// leaveOut drops the changes q excludes, and git's own files unless q asks
// for them; a rename is left out if either of its paths is.
func leaveOut(changes []versionstore.FileChange, q SessionQuery) []versionstore.FileChange {
	patterns := q.Exclude
	if !q.Git {
		patterns = append(slices.Clip(patterns), ".git")
	}
	kept := changes[:0]
	for _, fc := range changes {
		if !versionstore.Excluded(fc.Path, patterns) && (fc.From == "" || !versionstore.Excluded(fc.From, patterns)) {
			kept = append(kept, fc)
		}
	}
	return kept
}

// fileDiff writes one file's change, with the headers git writes (diff
// --git, new and deleted file modes, renames), so that git apply and patch
// -p1 take the diff. Its headers quote a path as git does (cquote.Name):
// the agent names the files, and a newline in a name would forge a header.
func (s *Service) fileDiff(ctx context.Context, w io.Writer, fc versionstore.FileChange) error {
	oldPath := fc.Path
	if fc.From != "" {
		oldPath = fc.From
	}
	var head strings.Builder
	fmt.Fprintf(&head, "diff --git %s %s\n", cquote.Name("a/"+oldPath), cquote.Name("b/"+fc.Path))
	switch {
	case fc.Before.IsZero() && !fc.BeforeUnknown:
		fmt.Fprintf(&head, "new file mode %s\n", gitMode(fc.AfterPerm))
	case fc.After.IsZero():
		fmt.Fprintf(&head, "deleted file mode %s\n", gitMode(fc.BeforePerm))
	case fc.BeforePerm != 0 && fc.AfterPerm != 0 && gitMode(fc.BeforePerm) != gitMode(fc.AfterPerm):
		fmt.Fprintf(&head, "old mode %s\nnew mode %s\n", gitMode(fc.BeforePerm), gitMode(fc.AfterPerm))
	}
	if fc.From != "" {
		fmt.Fprintf(&head, "rename from %s\nrename to %s\n", cquote.Name(fc.From), cquote.Name(fc.Path))
	}
	if fc.BeforeUnknown {
		_, err := io.WriteString(w, head.String()+"its bytes before are unknown: it changed before dshfs had seen it\n")
		return err
	}
	return s.inDiffSlot(ctx, func() error {
		a, aName, err := s.side(fc.Before, "a/"+oldPath)
		if err != nil {
			_, err = io.WriteString(w, head.String()+err.Error()+"\n")
			return err
		}
		b, bName, err := s.side(fc.After, "b/"+fc.Path)
		if err != nil {
			_, err = io.WriteString(w, head.String()+err.Error()+"\n")
			return err
		}
		if _, err := io.WriteString(w, head.String()); err != nil {
			return err
		}
		return writeUnified(w, aName, bName, a, b)
	})
}

// gitMode is the mode git records for a file with permission bits perm:
// executable or not (an unknown mode is a plain file's).
func gitMode(perm fs.FileMode) string {
	if perm&0o111 != 0 {
		return "100755"
	}
	return "100644"
}

// side is one side of a diff: the bytes of v under name (quoted), /dev/null
// for no file, or why the bytes cannot be shown.
func (s *Service) side(v versionstore.Version, name string) ([]byte, string, error) {
	if v.IsZero() {
		return nil, "/dev/null", nil
	}
	name = cquote.Name(name)
	data, err := s.store.Object(v)
	if errors.Is(err, versionstore.ErrNotKept) {
		return nil, name, fmt.Errorf("the bytes of %s at %s are not kept", name, v.Short())
	}
	return data, name, err
}
