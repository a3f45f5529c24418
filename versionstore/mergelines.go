package versionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"unicode/utf8"
)

// A line merge (MergeOptions.Lines) resolves a modify/modify conflict of a
// text file whose two sides, from the branch point, changed lines far
// enough apart: the workspace's bytes, the branch point's and the branch's
// are given to the caller's LineMerge (the daemon's runs git merge-file:
// this package runs no program), and a clean result is written like any
// change of the merge, guarded by the workspace's version the plan saw. A
// merge that would leave conflict markers stays a conflict: a merge never
// writes markers into the workspace.

// LineMerge merges three versions of a text file line by line, as
// `git merge-file main base branch` does: the workspace's changes (main)
// and the branch's since base, where they touch different lines. clean
// false says that they do not (the file stays a conflict); an error, that
// the merge could not be made (the whole merge fails with it), except
// ErrMergedTooLong. ctx bounds it.
type LineMerge func(ctx context.Context, base, main, branch []byte) (merged []byte, clean bool, err error)

// ErrMergedTooLong is a LineMerge's answer for a merged file longer than
// MergeLinesMax: the file stays a conflict.
var ErrMergedTooLong = errors.New("the merged file is longer than 16 MiB")

// OpMergeLines is the op of a file merged line by line.
const OpMergeLines = "merge-lines"

// MergeLinesMax bounds each of the three versions a line merge reads; a
// larger file stays a conflict.
const MergeLinesMax = 16 << 20

// Why a modify/modify conflict stays one under a line merge.
const (
	conflictLinesOverlap = ConflictModify + " (changed lines overlap or touch)"
	conflictNotText      = ConflictModify + " (not text: a line merge needs UTF-8 without NUL)"
	conflictLinesUnread  = ConflictModify + " (the versions could not be read whole)"
	conflictLinesTooLong = ConflictModify + " (the merged file would be longer than 16 MiB)"
)

// applies reports whether the item changes the workspace.
func (it MergeItem) applies() bool {
	return it.Op == "write" || it.Op == "remove" || it.Op == OpMergeLines
}

// result is the version the item leaves in the workspace: for a line
// merge, the merged bytes' (the change's Data then holds them).
func (it MergeItem) result() Version {
	if it.Op == OpMergeLines {
		return it.Merged
	}
	return it.Branch
}

// mergeLines resolves what it can of the plan's modify/modify conflicts by
// a line merge, and gives the merged bytes to the changes that write them.
func (s *Store) mergeLines(ctx context.Context, res *MergeResult, changes []BranchChange, merge LineMerge) error {
	if merge == nil {
		return errors.New("merge lines: no line merge given")
	}
	at := map[string]int{}
	for i, c := range changes {
		at[c.Key] = i
	}
	for i := range res.Items {
		it := &res.Items[i]
		if it.Conflict != ConflictModify {
			continue
		}
		c := &changes[at[it.Path]]
		merged, why, err := s.mergeLinesOf(ctx, *it, c.Data, merge)
		if err != nil {
			return fmt.Errorf("merge lines of %s: %w", it.Path, err)
		}
		if why != "" {
			it.Conflict = why
			continue
		}
		res.Conflicts--
		it.Conflict = ""
		if it.Merged = Sum(merged); it.Merged == it.Main {
			it.Op = "same" // the branch's changes are there already
			continue
		}
		it.Op, c.Data = OpMergeLines, merged
	}
	return nil
}

// mergeLinesOf is the line merge of one item, or why there is none.
func (s *Store) mergeLinesOf(ctx context.Context, it MergeItem, branch []byte, merge LineMerge) (merged []byte, why string, err error) {
	base, err := s.Object(it.Base)
	if err != nil || len(base) > MergeLinesMax || len(branch) > MergeLinesMax {
		return nil, conflictLinesUnread, nil
	}
	main, err := s.mainBytes(it)
	if err != nil {
		return nil, conflictLinesUnread, nil
	}
	if !isText(base) || !isText(main) || !isText(branch) {
		return nil, conflictNotText, nil
	}
	merged, clean, err := merge(ctx, base, main, branch)
	switch {
	case errors.Is(err, ErrMergedTooLong):
		return nil, conflictLinesTooLong, nil
	case err != nil:
		return nil, "", err
	case !clean:
		return nil, conflictLinesOverlap, nil
	case len(merged) > MergeLinesMax:
		return nil, conflictLinesTooLong, nil
	}
	return merged, "", nil
}

// mainBytes are the workspace's bytes of it, which must still be the
// version the plan saw.
func (s *Store) mainBytes(it MergeItem) ([]byte, error) {
	unlock := s.locks.Lock(it.Path)
	defer unlock()
	data, _, err := s.readWhole(Target{Key: it.Path, Display: it.Path}, "merge", MergeLinesMax)
	if err != nil {
		return nil, err
	}
	if Sum(data) != it.Main {
		return nil, errors.New("changed since the plan")
	}
	return data, nil
}

// isText is what a line merge takes: valid UTF-8 without a NUL byte.
func isText(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }
