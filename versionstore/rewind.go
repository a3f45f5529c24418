package versionstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// WriterRestore is the writer of versions put back by a restore or rewind.
const WriterRestore WriterKind = "restore"

// Checkpoint is a named position in the journal. It pins the version every
// file had at that moment without copying anything: a file changed since
// is given back the version its first later change replaced. The index
// stores a diskCheckpoint (records.go).
type Checkpoint struct {
	Name  string    `json:"name"`
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
	Files int       `json:"files"` // files with a version at that moment
	// Auto marks the checkpoint a rewind makes before it changes anything.
	Auto bool `json:"auto,omitempty"`
}

func checkpoints(tx *bolt.Tx) ([]Checkpoint, error) {
	var out []Checkpoint
	err := tx.Bucket(bucketCheckpoints).ForEach(func(k, v []byte) error {
		cp, err := decodeCheckpoint(v)
		if err != nil {
			return fmt.Errorf("decode checkpoint %q: %w", k, err)
		}
		out = append(out, cp)
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		return out[i].Seq < out[j].Seq || out[i].Seq == out[j].Seq && out[i].Time.Before(out[j].Time)
	})
	return out, err
}

// Checkpoints lists the checkpoints, oldest first.
func (s *Store) Checkpoints() ([]Checkpoint, error) {
	var out []Checkpoint
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		out, err = checkpoints(tx)
		return err
	})
	return out, err
}

// The checkpoint errors, each wrapped with the name it is about.
var (
	ErrNoCheckpoint     = errors.New("no such checkpoint")
	ErrCheckpointExists = errors.New("exists")
	ErrCheckpointName   = errors.New("at most 200 bytes of UTF-8, no slash or control characters")
)

// The conflicts a rewind leaves a file at (RewindAction.Err), besides the
// store's *Error values.
var (
	ErrNotRegularNow       = errors.New("not a regular file now")
	ErrUnknownAtCheckpoint = errors.New("its version at the checkpoint is unknown (changed before dshfs had seen it)")
	ErrBeingWritten        = errors.New("being written through the mount")
	ErrChangedDuringRewind = errors.New("changed behind dshfs's back during the rewind")
)

// ErrWouldLose is wrapped by errors of a restore or rewind refused because
// the bytes it would replace or remove are not kept anywhere.
var ErrWouldLose = errors.New("its current bytes are not kept (over the capture limit, or they could not be stored), and replacing them would lose them")

// Checkpoint records a checkpoint named name ("" picks cp-N). It first
// brings the index up to date with the whole workspace (Sync: the first
// checkpoint reads every file, later ones mostly stat them), so the
// checkpoint pins every file, not only those dshfs had seen. progress, if
// set, is told how far that walk has got.
func (s *Store) Checkpoint(ctx context.Context, name string, progress func(done, total int)) (Checkpoint, error) {
	return s.checkpoint(ctx, name, false, progress)
}

func (s *Store) checkpoint(ctx context.Context, name string, auto bool, progress func(done, total int)) (Checkpoint, error) {
	if err := checkName(name); err != nil {
		return Checkpoint{}, err
	}
	if name != "" {
		if _, err := s.findCheckpoint(name); err == nil {
			return Checkpoint{}, fmt.Errorf("checkpoint %q %w", name, ErrCheckpointExists)
		}
	}
	if _, err := s.sync(ctx, "checkpoint", progress); err != nil {
		return Checkpoint{}, err
	}
	cp, err := s.mark(name, auto)
	if err != nil && !errors.Is(err, ErrCheckpointExists) {
		return cp, indexError("checkpoint", "", err)
	}
	return cp, err
}

// mark records a checkpoint at the journal's end, the index being up to
// date with the workspace.
func (s *Store) mark(name string, auto bool) (Checkpoint, error) {
	return s.markCounting(name, auto, true)
}

// markCounting is mark; without count, Checkpoint.Files is left 0 and the
// index's files are not read (a branch's checkpoint: O(1)).
func (s *Store) markCounting(name string, auto, count bool) (Checkpoint, error) {
	s.flushPending()
	var cp Checkpoint
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCheckpoints)
		if name == "" {
			for n := b.Stats().KeyN + 1; ; n++ {
				if name = "cp-" + strconv.Itoa(n); b.Get([]byte(name)) == nil {
					break
				}
			}
		} else if b.Get([]byte(name)) != nil {
			return fmt.Errorf("checkpoint %q %w", name, ErrCheckpointExists)
		}
		files := 0
		if count {
			files = countFiles(tx)
		}
		cp = Checkpoint{Name: name, Seq: journalSeq(tx), Time: s.now().UTC(), Files: files, Auto: auto}
		v, err := encodeCheckpoint(cp)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), v)
	})
	return cp, err
}

// countFiles is the number of files the index holds a version of.
func countFiles(tx *bolt.Tx) int {
	files := 0
	tx.Bucket(bucketFiles).ForEach(func(_, v []byte) error {
		if r, err := decodeRecord(v); err == nil && !r.Version.IsZero() {
			files++
		}
		return nil
	})
	return files
}

// checkName refuses a checkpoint name that would not print as itself: a
// control character (C0, DEL, C1) in it could rewrite the terminal of
// whoever lists the checkpoints, and bytes that are not UTF-8 do not
// survive JSON.
func checkName(name string) error {
	control := func(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }
	if len(name) > 200 || !utf8.ValidString(name) || strings.ContainsFunc(name, control) || strings.Contains(name, "/") {
		return fmt.Errorf("checkpoint name %q: %w", name, ErrCheckpointName)
	}
	return nil
}

// FindCheckpoint returns the checkpoint called name (ErrNoCheckpoint if
// there is none).
func (s *Store) FindCheckpoint(name string) (Checkpoint, error) { return s.findCheckpoint(name) }

func (s *Store) findCheckpoint(name string) (Checkpoint, error) {
	var cp Checkpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketCheckpoints).Get([]byte(name))
		if v == nil {
			return fmt.Errorf("checkpoint %q: %w", name, ErrNoCheckpoint)
		}
		var err error
		cp, err = decodeCheckpoint(v)
		return err
	})
	return cp, err
}

// RemoveCheckpoint deletes the checkpoint called name (ErrNoCheckpoint if
// there is none). Nothing else changes: the versions it pinned stay in the
// history, and their bytes until a collection finds nothing else needs them.
func (s *Store) RemoveCheckpoint(name string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCheckpoints)
		if b.Get([]byte(name)) == nil {
			return fmt.Errorf("checkpoint %q: %w", name, ErrNoCheckpoint)
		}
		return b.Delete([]byte(name))
	})
}

// RestoreResult says what a restore replaced.
type RestoreResult struct {
	From Version `json:"from"` // zero: there was no file
	To   Version `json:"to"`
}

// Restore makes v the content of t again, as a guarded write: under t's
// lock, over the bytes it finds there (kept first, so the restore can be
// undone), refused while the mount is writing the file. The bytes of v are
// verified before anything is written.
func (s *Store) Restore(ctx context.Context, t Target, v Version, w Writer) (RestoreResult, error) {
	if ctx.Err() != nil {
		return RestoreResult{}, fail(ReasonAborted, "restore", "")
	}
	data, err := s.Object(v)
	if err != nil {
		return RestoreResult{}, err
	}
	var res RestoreResult
	defer s.published(t.Key, &res.To)
	s.mount.awaitWriters(ctx, t.Key)
	unlock := s.locks.Lock(t.Key)
	defer unlock()
	owner, err := s.versionOwner(t.Key, v)
	if err != nil {
		return res, indexReadError("restore", t.Display, err)
	}
	res, err = s.putBackLocked(ctx, t, v, owner, data, nil, w)
	return res, err
}

// putBackLocked writes data (the bytes of v, which owner owned) to t, or
// removes t when v is zero. With expect set, the file must still be at
// *expect (zero: absent).
func (s *Store) putBackLocked(ctx context.Context, t Target, v Version, owner *Owner, data []byte, expect *Version, w Writer) (RestoreResult, error) {
	return s.putBack(ctx, t, v, owner, data, expect, w, pubHow{})
}

// putBack is putBackLocked publishing as how says (create aside, which it
// chooses).
func (s *Store) putBack(ctx context.Context, t Target, v Version, owner *Owner, data []byte, expect *Version, w Writer, how pubHow) (RestoreResult, error) {
	s.flushPending()
	cur, err := s.snapshotLocked(t, "restore", s.objects.maxKeep+1) // its bytes are kept by the commit below
	if err != nil {
		return RestoreResult{}, err
	}
	if cur.fi != nil && !cur.fi.Mode().IsRegular() {
		return RestoreResult{}, fail(ReasonNotRegular, "restore", t.Display)
	}
	// An entry that cannot be read cannot record the restore either:
	// nothing is replaced that the index could not then account for.
	if _, err := s.indexVersion(t.Key); err != nil {
		return RestoreResult{}, indexReadError("restore", t.Display, err)
	}
	res := RestoreResult{From: cur.version}
	if s.mount.writing(t.Key) {
		return res, s.mount.writingFailure("restore", t.Display, t.Key)
	}
	if expect != nil && *expect != cur.version {
		return res, fail(ReasonChanged, "restore", t.Display)
	}
	if cur.version == v {
		return res, nil // already there
	}
	var own Owner
	if !v.IsZero() {
		if own, err = s.putBackOwner(t, v, cur, owner); err != nil {
			return res, err
		}
	}
	// What is replaced must stay restorable: its bytes are kept first, or
	// nothing is replaced.
	if cur.fi != nil {
		if err := s.keepReplaced(t, "restore", cur); err != nil {
			return res, err
		}
	}
	// A tool's publish here is on disk, and its record gone, before the
	// file changes: a cut before this change's commit must not take the
	// bytes put back for that publish lost (settle.go).
	s.settleUnder(t.Key, true)
	at := s.now()
	if v.IsZero() {
		// As publish does: look once more, as late as possible, so a write
		// straight into the backing directory is not removed unseen.
		if err := s.removeKey(t, cur.fp); err != nil {
			return res, err
		}
		return res, s.commitAfter(t, cur, change{writer: w, at: at})
	}
	how.create = cur.fi == nil
	fi, err := s.publish(ctx, t, "restore", data, own.Perm, &own, &cur, how)
	if err != nil {
		return res, err
	}
	var fp fingerprint
	if fi != nil {
		fp = fingerprintOf(fi)
	}
	res.To = v
	var keep []byte
	if s.objects.keeps(int64(len(data))) {
		keep = data // stays kept, whatever a collection did since it was read
	}
	return res, s.commitAfter(t, cur, change{version: v, fp: fp, size: int64(len(data)), writer: w, at: at, created: cur.fi == nil, data: keep})
}

// commitAfter records what snap found and then c, in one transaction. Its
// failure is ReasonIndex: the file changed, the index does not know.
func (s *Store) commitAfter(t Target, snap snapshot, c change) error {
	keys, cs := []string{t.Key}, []change{c}
	if prior, ok := s.snapshotRecord(t.Key, snap); ok {
		keys, cs = []string{t.Key, t.Key}, []change{prior, c}
	}
	if err := s.commit(keys, cs); err != nil {
		return indexError("restore", t.Display, err)
	}
	return nil
}

// RewindAction is one file a rewind changed, or would change.
type RewindAction struct {
	Path string  `json:"path"`
	Op   string  `json:"op"`   // "restore", "recreate" or "remove"
	From Version `json:"from"` // zero: no file now
	To   Version `json:"to"`   // zero: no file at the checkpoint
	// Err is why the file was left as it is (a conflict), as data; Error
	// is its words on the wire, filled by toolapi (WordRewind).
	Err   error  `json:"-"`
	Error string `json:"error,omitempty"`
	// InGit marks a git repository's own files (under a .git directory):
	// rewinding them undoes the commits and branch moves made since.
	InGit bool `json:"in_git,omitempty"`
	// In a rewind of one actor's changes, ActorVersion is the version the
	// actor's last change left (From is the file now, To before the actor);
	// ChangedBy, on a conflict, is who changed the file after the actor.
	ActorVersion Version `json:"actor_version,omitzero"`
	ChangedBy    *Writer `json:"changed_by,omitempty"`
}

// RewindResult says what a rewind did.
type RewindResult struct {
	Checkpoint string `json:"checkpoint"`
	Before     string `json:"before,omitempty"` // the checkpoint made first
	DryRun     bool   `json:"dry_run,omitempty"`
	// Actor is whose changes alone the rewind undid ("": everyone's).
	Actor string `json:"actor,omitempty"`
	// Refused says nothing was changed because of the conflicts found
	// first (a rewind of one actor's changes without Partial).
	Refused   bool           `json:"refused,omitempty"`
	Actions   []RewindAction `json:"actions"`
	Conflicts int            `json:"conflicts"`
}

// RewindOptions shape a rewind.
type RewindOptions struct {
	// DryRun reports what would change and changes nothing.
	DryRun bool
	// Paths limits the rewind to these paths and what is below them (none:
	// the whole workspace).
	Paths []string
	// Exclude leaves out the paths a pattern matches (see Excluded).
	Exclude []string
	// Actor, if set, limits the rewind to the changes attributed to that
	// actor (rewindactor.go): its tool calls, its process tree's writes
	// through the mount, restores run under its name.
	Actor string
	// Partial lets a rewind of one actor's changes go ahead despite
	// conflicts, leaving the conflicting files alone; without it a conflict
	// found first changes nothing.
	Partial bool
	// Writer is who the history names for the versions put back.
	Writer Writer
	// Progress, if set, is told how far the rewind has got: first the walk
	// of the workspace, then the files.
	Progress func(done, total int)
}

// Rewind gives every file changed since the checkpoint name the version it
// had then: restoring changed files, recreating deleted ones, removing
// created ones. It first brings the index up to date with the whole
// workspace, so changes made behind dshfs's back count too; unless DryRun,
// it then makes a checkpoint, so the rewind can itself be rewound. Each
// file is changed under its lock and only if it is still what the plan saw:
// a file written meanwhile — by a shell through the mount, or behind
// dshfs's back — is reported as a conflict and left alone, and so is a file
// whose bytes at the checkpoint are not kept.
func (s *Store) Rewind(ctx context.Context, name string, o RewindOptions) (RewindResult, error) {
	res := RewindResult{Checkpoint: name, DryRun: o.DryRun, Actions: []RewindAction{}}
	cp, err := s.findCheckpoint(name)
	if err != nil {
		return res, err
	}
	st, err := s.sync(ctx, "rewind", o.Progress)
	if err != nil {
		return res, err
	}
	if o.Actor == "" && IsMergeStep(name) {
		o.Actor = name // a merge's step: its changes alone
	}
	if o.Actor != "" {
		return s.rewindActor(ctx, cp, st.Unread, o, res)
	}
	keys, first, err := s.rewindPlan(cp, o)
	if err != nil {
		return res, err
	}
	if !o.DryRun {
		before, err := s.mark("", true)
		if err != nil {
			return res, indexError("rewind", "", err)
		}
		res.Before = before.Name
	}
	for i, key := range keys {
		if ctx.Err() != nil {
			return res, fail(ReasonAborted, "rewind", "")
		}
		if o.Progress != nil {
			o.Progress(i, len(keys))
		}
		if a, ok := s.rewindOne(ctx, key, first[key], nil, o.DryRun, o.Writer); ok {
			if err := stopOnIndex(key, a.Err); err != nil {
				return res, err
			}
			if a.Err != nil {
				res.Conflicts++
			}
			a.InGit = inGit(key)
			res.Actions = append(res.Actions, a)
		}
	}
	if !o.DryRun {
		s.removeNewDirs(cp, first, removedFiles(res.Actions))
	}
	unplanned := s.unplannedConflicts(first, st.Unread, o)
	res.Actions = append(res.Actions, unplanned...)
	res.Conflicts += len(unplanned)
	if o.Progress != nil {
		o.Progress(len(keys), len(keys))
	}
	return res, nil
}

// stopOnIndex is the error that stops a rewind at key when its change
// there failed as err: the file changed and the index cannot say so, and
// every later change would be as unrecorded. A rewind run again once there
// is room finishes the work.
func stopOnIndex(key string, err error) error {
	var fe *Error
	if errors.As(err, &fe) && fe.Reason == ReasonIndex {
		return indexError("rewind", key, fe.Err)
	}
	return nil
}

// unplannedConflicts are the conflicts of the files in the rewind's scope
// that the plan leaves alone but that may differ from the checkpoint
// unseen: being written, or unread by the look-over.
func (s *Store) unplannedConflicts(first map[string]JournalEntry, unread map[string]error, o RewindOptions) []RewindAction {
	var out []RewindAction
	for _, key := range s.owedUnplanned(first, o) {
		out = append(out, s.unplanned(key, ErrBeingWritten))
	}
	for _, key := range unreadUnplanned(unread, first, o) {
		out = append(out, s.unplanned(key, osError("restore", key, unread[key])))
	}
	return out
}

// unplanned is the conflict of a file the plan leaves alone that may differ
// from the checkpoint unseen, for the reason why, at the version the index
// holds.
func (s *Store) unplanned(key string, why error) RewindAction {
	v, err := s.indexVersion(key)
	if err != nil {
		why = indexReadError("rewind", key, err)
	}
	return RewindAction{Path: key, Op: "restore", From: v, To: v, Err: why, InGit: inGit(key)}
}

// owedUnplanned are the files in the rewind's scope that the plan leaves
// alone but that are being written through the mount with changes not
// committed yet: they may differ from the checkpoint unseen, so they are
// conflicts, not files at their checkpoint version.
func (s *Store) owedUnplanned(planned map[string]JournalEntry, o RewindOptions) []string {
	var out []string
	for _, key := range s.mount.owed() {
		if _, ok := planned[key]; !ok && (ChangeQuery{Paths: o.Paths}).selects(JournalEntry{Path: key}) && !Excluded(key, o.Exclude) {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// unreadUnplanned are the paths in the rewind's scope that its walk could
// not look at and that the plan leaves alone: they may differ from the
// checkpoint unseen, so they are conflicts. (A planned one meets the same
// failure when the rewind looks at it.)
func unreadUnplanned(unread map[string]error, planned map[string]JournalEntry, o RewindOptions) []string {
	var out []string
	for key := range unread {
		if _, ok := planned[key]; !ok && (ChangeQuery{Paths: o.Paths}).selects(JournalEntry{Path: key}) && !Excluded(key, o.Exclude) {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// rewindPlan lists the paths a rewind to cp changes, each with its first
// change since: removals first, deepest first, then restores in path order.
func (s *Store) rewindPlan(cp Checkpoint, o RewindOptions) ([]string, map[string]JournalEntry, error) {
	s.flushPending()
	var first map[string]JournalEntry
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		first, err = firstChangesAfter(tx, cp.Seq)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return planOrder(first, o), first, nil
}

// planOrder is the paths of first in the rewind's scope, in the order a
// rewind changes them: removals first, deepest first, then restores in
// path order.
func planOrder(first map[string]JournalEntry, o RewindOptions) []string {
	keys := make([]string, 0, len(first))
	for k := range first {
		if (ChangeQuery{Paths: o.Paths}).selects(JournalEntry{Path: k}) && !Excluded(k, o.Exclude) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, rj := first[keys[i]].Prev.IsZero(), first[keys[j]].Prev.IsZero()
		switch {
		case ri != rj:
			return ri
		case ri:
			return keys[i] > keys[j]
		default:
			return keys[i] < keys[j]
		}
	})
	return keys
}

// Excluded reports whether a pattern matches key. A pattern with no slash
// matches any element of the path (".git" leaves out every repository's own
// files, "*.log" every log); one with a slash matches the path, or a
// directory above it, from the workspace's root ("build/out").
func Excluded(key string, patterns []string) bool {
	for _, p := range patterns {
		p = strings.Trim(p, "/")
		elems := strings.Split(key, "/")
		for i := range elems {
			cand := elems[i]
			if strings.Contains(p, "/") {
				cand = strings.Join(elems[:i+1], "/")
			}
			if ok, _ := path.Match(p, cand); ok {
				return true
			}
		}
	}
	return false
}

// inGit reports whether key is one of a git repository's own files.
func inGit(key string) bool {
	return key == ".git" || strings.HasPrefix(key, ".git/") || strings.Contains(key, "/.git/")
}

// rewindOne puts key back to what e replaced; ok is false when there was
// nothing to do. With expect set, the index must still hold *expect for
// key: a change since by anyone is a conflict.
func (s *Store) rewindOne(ctx context.Context, key string, e JournalEntry, expect *Version, dryRun bool, w Writer) (a RewindAction, ok bool) {
	t := Target{Key: key, Display: key}
	a = RewindAction{Path: key, To: e.Prev}
	var changed bool
	defer func() {
		if changed && s.onPublish != nil {
			s.onPublish(key) // after the unlock: the kernel's view of key is stale
		}
	}()
	s.mount.awaitWriters(ctx, key)
	unlock := s.locks.Lock(key)
	defer unlock()
	s.flushPending()
	known, err := s.indexVersion(key)
	if err != nil {
		a.Op, a.Err = "restore", indexReadError("rewind", key, err)
		return a, true
	}
	if fi, err := s.lstatKey(key); err == nil && !fi.Mode().IsRegular() {
		a.Op, a.Err = "restore", ErrNotRegularNow
		return a, true
	}
	cur, err := s.snapshotLocked(t, "rewind", s.objects.maxKeep+1)
	switch {
	case err != nil:
		a.Op, a.Err = "restore", err
		return a, true
	case cur.fi != nil && !cur.fi.Mode().IsRegular():
		a.Op, a.Err = "restore", ErrNotRegularNow
		return a, true
	}
	a.From = cur.version
	if cur.version == e.Prev && !e.PrevUnknown {
		return a, false
	}
	switch {
	case e.Prev.IsZero():
		a.Op = "remove"
	case cur.fi == nil:
		a.Op = "recreate"
	default:
		a.Op = "restore"
	}
	if expect != nil && known != *expect {
		a.Err = ErrChangedSinceLooked
		return a, true
	}
	if e.PrevUnknown {
		a.Err = ErrUnknownAtCheckpoint
		return a, true
	}
	var data []byte
	if !e.Prev.IsZero() {
		if data, err = s.Object(e.Prev); err != nil {
			a.Err = err
			return a, true
		}
	}
	if s.mount.writing(key) {
		a.Err = ErrBeingWritten
		return a, true
	}
	if !e.Prev.IsZero() {
		if a.Err = ownerConflict(t, cur, e.PrevOwner); a.Err != nil {
			return a, true
		}
	}
	if dryRun {
		return a, true
	}
	if cur.version != known {
		a.Err = ErrChangedDuringRewind
		return a, true
	}
	if _, err := s.putBackLocked(ctx, t, e.Prev, e.PrevOwner, data, &known, w); err != nil {
		a.Err = err
		return a, true
	}
	changed = true
	return a, true
}

// indexVersion is the version the index holds for key (zero: none, or
// absent). An entry that cannot be read is an error, never "none".
func (s *Store) indexVersion(key string) (v Version, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		r, _, err := getRecord(tx, key)
		v = r.Version
		return err
	})
	return v, err
}

// kept reports whether the bytes of v are in the object store.
func (s *Store) kept(v Version) (ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		ok = s.objects.present(tx, v)
		return nil
	})
	return ok, err
}
