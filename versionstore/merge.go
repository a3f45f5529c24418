package versionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A merge brings a branch's changes into the workspace. Each path the
// branch changed is compared at three versions: at the branch point (the
// branch's checkpoint), in the workspace now, in the branch now. Changed in
// the branch alone, it is applied under the file's lock, guarded by the
// version the plan saw (compare-and-swap); changed on both sides, it is a
// conflict, and by default nothing is applied. The applied changes are one
// step: they are written under the actor named by MergeStep, after a
// checkpoint of that name, so that `rewind merge:NAME` undoes exactly them.

// MergeWriterGrace bounds the wait, over a whole merge, for files being
// written to be let go: the kernel releases a file after its close has
// returned, so a command that has just written one may still hold it. A
// file still held after it is a conflict.
const MergeWriterGrace = 2 * time.Second

// MergeStepPrefix begins the name of a merge's checkpoint and actor.
const MergeStepPrefix = "merge:"

// BranchChange is a branch's side of one changed path.
type BranchChange struct {
	Key     string
	Version Version     // zero: deleted in the branch
	Data    []byte      // the bytes of Version
	Perm    fs.FileMode // the branch file's permission bits (0: unknown)
	Writing bool        // open for writing in the branch
	// Force: the branch's bytes replace whatever the workspace holds when
	// the plan looks (still compare-and-swap against that), as for a ref
	// the merge itself keeps.
	Force bool
}

// MergeItem is the plan for one path, with its three versions.
type MergeItem struct {
	Path     string  `json:"path"`
	Op       string  `json:"op"` // write, remove, merge-lines, same (nothing to do), conflict
	Base     Version `json:"base"`
	Main     Version `json:"main"`
	Branch   Version `json:"branch"`
	Merged   Version `json:"merged,omitzero"` // what merge-lines writes
	Conflict string  `json:"conflict,omitempty"`
	Applied  bool    `json:"applied,omitempty"`
}

// MergeOptions shape a merge.
type MergeOptions struct {
	DryRun  bool // plan only
	Partial bool // apply the clean part despite conflicts
	Lines   bool // merge a text file's changes to lines apart (mergelines.go)
	// LineMerge is the line merge that Lines runs, given by the caller:
	// the store runs no program.
	LineMerge LineMerge
	// IncludeIgnored is for whoever gathers the branch's changes (the
	// daemon leaves git-ignored paths out unless it is set): the store
	// merges what it is given.
	IncludeIgnored bool
}

// MergeResult is what a merge did.
type MergeResult struct {
	Step      string      `json:"step,omitempty"` // the checkpoint and actor of the applied changes
	Items     []MergeItem `json:"items"`
	Conflicts int         `json:"conflicts"`
	Applied   int         `json:"applied"`
	Refused   bool        `json:"refused,omitempty"` // conflicts, nothing applied
	Git       []GitMerge  `json:"git,omitempty"`     // the branch's git repositories
	// Ignored counts the changed files left in the branch because git
	// ignores them in the workspace, by their first path element.
	Ignored []IgnoredPaths `json:"ignored,omitempty"`
}

// IgnoredPaths are the git-ignored files a merge left out under Path (a
// first path element, with a trailing slash for a directory).
type IgnoredPaths struct {
	Path  string `json:"path"`
	Files int    `json:"files"`
}

// The conflicts of a merge (MergeItem.Conflict).
const (
	ConflictModify       = "modify/modify"
	ConflictModifyDelete = "modify/delete"
	ConflictAddAdd       = "add/add"
	ConflictWriting      = "being written"
	ConflictUnknown      = "version at the branch point unknown"
)

// Merge merges changes, made in a branch from checkpoint base, into the
// workspace under the step merge:name.
func (s *Store) Merge(ctx context.Context, name, base string, changes []BranchChange, o MergeOptions) (MergeResult, error) {
	cp, err := s.findCheckpoint(base)
	if err != nil {
		return MergeResult{}, err
	}
	res, err := s.mergePlan(cp, changes)
	if err == nil && o.Lines {
		err = s.mergeLines(ctx, &res, changes, o.LineMerge)
	}
	if err != nil || o.DryRun || res.Conflicts > 0 && !o.Partial {
		res.Refused = err == nil && !o.DryRun && res.Conflicts > 0
		return res, err
	}
	if res.Step, err = s.mergeStep(name); err != nil {
		return res, err
	}
	data := map[string]BranchChange{}
	for _, c := range changes {
		data[c.Key] = c
	}
	err = s.mergeApply(ctx, &res, data, o)
	return res, err
}

// mergePlan compares each change with the workspace's version at the
// checkpoint and now.
func (s *Store) mergePlan(cp Checkpoint, changes []BranchChange) (MergeResult, error) {
	res := MergeResult{Items: []MergeItem{}}
	first, err := s.journalSince(cp.Seq)
	if err != nil {
		return res, err
	}
	sort.Slice(changes, func(i, j int) bool { return changes[i].Key < changes[j].Key })
	settle := time.Now().Add(MergeWriterGrace)
	for _, c := range changes {
		for s.mount.writing(c.Key) && time.Now().Before(settle) {
			s.mount.awaitWriters(context.Background(), c.Key)
		}
		main, err := s.versionNow(c.Key)
		if err != nil {
			return res, err
		}
		e, changed := first[c.Key]
		changed = changed && !c.Force // its base is the workspace's now
		it := MergeItem{Path: c.Key, Base: main, Main: main, Branch: c.Version}
		if changed {
			it.Base = e.Prev
		}
		it.Op, it.Conflict = classify(it, changed && e.PrevUnknown, c.Writing || s.mount.writing(c.Key))
		if it.Conflict != "" {
			res.Conflicts++
		}
		res.Items = append(res.Items, it)
	}
	return res, nil
}

// classify is the plan for one path.
func classify(it MergeItem, unknown, writing bool) (op, conflict string) {
	switch {
	case it.Branch == it.Base || it.Branch == it.Main:
		return "same", ""
	case writing:
		return "conflict", ConflictWriting
	case unknown:
		return "conflict", ConflictUnknown
	case it.Main == it.Base && it.Branch.IsZero():
		return "remove", ""
	case it.Main == it.Base:
		return "write", ""
	case it.Base.IsZero():
		return "conflict", ConflictAddAdd
	case it.Main.IsZero() || it.Branch.IsZero():
		return "conflict", ConflictModifyDelete
	}
	return "conflict", ConflictModify
}

// versionNow is the version of key's bytes now (zero: no file).
func (s *Store) versionNow(key string) (Version, error) {
	unlock := s.locks.Lock(key)
	defer unlock()
	cur, err := s.snapshotLocked(Target{Key: key, Display: key}, "merge", -1)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		var fe *Error
		if errors.As(err, &fe) && fe.Reason == ReasonMissing {
			return Version{}, nil
		}
		return Version{}, err
	}
	return cur.version, nil
}

func (s *Store) journalSince(seq uint64) (first map[string]JournalEntry, err error) {
	s.flushPending()
	err = s.db.View(func(tx *bolt.Tx) error {
		first, err = firstChangesAfter(tx, seq)
		return err
	})
	return first, err
}

// mergeStep records the checkpoint the merge's changes follow, named
// merge:name (merge:name-2, … when taken).
func (s *Store) mergeStep(name string) (string, error) {
	step := MergeStepPrefix + name
	for n := 2; ; n++ {
		_, err := s.MarkCheckpoint(step)
		if !errors.Is(err, ErrCheckpointExists) {
			return step, err
		}
		step = fmt.Sprintf("%s%s-%d", MergeStepPrefix, name, n)
	}
}

var errIndexStop = errors.New("index failure")

// mergeOne applies one planned change, guarded by the workspace's version
// the plan saw; a file being written is refused, never waited for.
func (s *Store) mergeOne(ctx context.Context, it MergeItem, data []byte, perm fs.FileMode, w Writer) (err error) {
	t := Target{Key: it.Path, Display: it.Path}
	defer func() {
		if err == nil && s.onPublish != nil {
			s.onPublish(it.Path)
		}
	}()
	unlock := s.locks.Lock(it.Path)
	defer unlock()
	expect := it.Main
	own, err := s.mergeOwner(it, perm)
	if err != nil {
		return err
	}
	_, err = s.putBack(ctx, t, it.result(), own, data, &expect, w, pubHow{nosync: true}) // synced with the rest (mergeEnd)
	if stopOnIndex(it.Path, err) != nil {
		return fmt.Errorf("%w: %w", errIndexStop, err)
	}
	return asMergeError(err)
}

// mergeOwner is who owns the file a merge writes, and its mode: the
// workspace file's owner and mode where there is one (the branch's owner
// and mode do not replace them), else the daemon's user with the branch
// file's permission bits, at most as open as the store makes files (a
// branch's 0600 file lands 0600). nil for a removal.
func (s *Store) mergeOwner(it MergeItem, branchPerm fs.FileMode) (*Owner, error) {
	if it.Branch.IsZero() {
		return nil, nil
	}
	fi, err := s.lstatKey(it.Path)
	if err == nil {
		if uid, gid, ok := ownerOf(fi); ok {
			if euid := os.Geteuid(); euid != 0 && uid != euid {
				e := fail(ReasonOwnerChanged, "merge", it.Path)
				e.Err = fmt.Errorf("the workspace's file belongs to uid %d, and the daemon's user (uid %d) cannot write it as theirs", uid, euid)
				return nil, e
			}
			return &Owner{Uid: uint32(uid), Gid: uint32(gid), Perm: fi.Mode().Perm()}, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("merge %q: %w", it.Path, err)
	}
	perm := s.fileMode
	if branchPerm != 0 {
		perm = branchPerm & (s.fileMode | 0o111)
	}
	return &Owner{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid()), Perm: perm}, nil
}

// asMergeError names a merge's failure as the merge's, with its cause.
func asMergeError(err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Op != "restore" {
		return err
	}
	e.Op = "merge"
	if e.Reason == ReasonOwnerChanged && e.Err == nil {
		e.Err = errors.New("another user took the workspace's file while the merge ran; merge again")
	}
	return err
}

// IsMergeStep reports whether a checkpoint name is a merge's.
func IsMergeStep(name string) bool { return strings.HasPrefix(name, MergeStepPrefix) }
