package versionstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// A rewind of one actor's changes (RewindOptions.Actor) undoes, of the
// journal since the checkpoint, only the steps whose writer names that
// actor: its tool calls, the writes through the mount of the processes it
// was registered for and their descendants (fusefs.Actors records the
// actor beside the pid and command), and restores or rewinds run under its
// name. Every other writer's changes stay. Each path the actor changed
// goes back to the version the actor's first change there replaced, which
// undoes a creation (removed), a deletion (recreated), a write (restored)
// and, path by path, a rename. A path any other writer changed after the
// actor's first change there is a conflict: putting it back would undo
// that writer's change too, so it is reported with its three versions
// (before the actor, the actor's, now) and left alone.

// ErrChangedSinceLooked is the conflict of a file changed after a rewind of
// one actor's changes looked at it, before its turn.
var ErrChangedSinceLooked = errors.New("changed by another writer during the rewind")

// ActorConflict is the conflict of a file another writer changed after
// the actor whose changes a rewind undoes.
type ActorConflict struct {
	Actor string
	By    Writer // the first writer after the actor
}

func (e *ActorConflict) Error() string {
	return fmt.Sprintf("changed after actor %q's change by another writer; left as it is", e.Actor)
}

// actorStep is what an actor did to one path since a checkpoint.
type actorStep struct {
	first JournalEntry  // the actor's first change: Prev is the version before it
	last  Version       // the version the actor's last change left
	later *JournalEntry // the first change by another writer after first, if any
	now   Version       // the version the path's last change left
}

// byActor reports whether w names actor: a tool call, a write through the
// mount attributed to it, a restore run under its name.
func byActor(w Writer, actor string) bool { return actor != "" && w.Actor == actor }

// actorSteps returns, for every path actor changed after seq, what it did
// and what was done there after it.
func actorSteps(tx *bolt.Tx, seq uint64, actor string) (map[string]*actorStep, error) {
	steps := map[string]*actorStep{}
	c := tx.Bucket(bucketJournal).Cursor()
	for k, v := c.Seek(journalKey(seq + 1)); k != nil; k, v = c.Next() {
		var e JournalEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("decode journal entry %d: %w", binary.BigEndian.Uint64(k), err)
		}
		st := steps[e.Path]
		switch {
		case byActor(e.Writer, actor):
			if st == nil {
				st = &actorStep{first: e}
				steps[e.Path] = st
			}
			st.last = e.Version
		case st != nil && st.later == nil:
			st.later = &e
		}
		if st != nil {
			st.now = e.Version
		}
	}
	return steps, nil
}

// actorPlan lists the paths a rewind of o.Actor's changes since cp looks
// at, in the order a rewind changes them, with what the actor did to each.
func (s *Store) actorPlan(cp Checkpoint, o RewindOptions) ([]string, map[string]*actorStep, error) {
	s.flushPending()
	var steps map[string]*actorStep
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		steps, err = actorSteps(tx, cp.Seq, o.Actor)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if IsMergeStep(o.Actor) {
		keepMergedObjects(steps)
	}
	first := make(map[string]JournalEntry, len(steps))
	for k, st := range steps {
		first[k] = st.first
	}
	return planOrder(first, o), steps, nil
}

// rewindActor undoes o.Actor's changes since cp. It looks at every file
// first, changing nothing: a conflict found then refuses the whole rewind
// unless o.Partial, which changes the rest. A file changed by someone else
// between that look and its change is a conflict as in any rewind.
func (s *Store) rewindActor(ctx context.Context, cp Checkpoint, unread map[string]error, o RewindOptions, res RewindResult) (RewindResult, error) {
	res.Actor = o.Actor
	keys, steps, err := s.actorPlan(cp, o)
	if err != nil {
		return res, err
	}
	looked, err := s.actorLook(ctx, keys, steps, o)
	if err != nil {
		return res, err
	}
	first := make(map[string]JournalEntry, len(steps))
	for k, st := range steps {
		first[k] = st.first
	}
	looked = append(looked, s.unplannedConflicts(first, unread, o)...)
	conflicted := map[string]bool{}
	for _, a := range looked {
		if a.Err != nil {
			conflicted[a.Path] = true
		}
	}
	if o.DryRun || len(conflicted) > 0 && !o.Partial {
		res.Refused = !o.DryRun
		res.Actions = looked
		res.Conflicts = len(conflicted)
		return res, nil
	}
	before, err := s.mark("", true)
	if err != nil {
		return res, indexError("rewind", "", err)
	}
	res.Before = before.Name
	err = s.actorApply(ctx, keys, steps, conflicted, o, &res)
	for _, a := range looked {
		if conflicted[a.Path] {
			res.Actions = append(res.Actions, a)
			res.Conflicts++
		}
	}
	if err == nil {
		s.removeNewDirs(cp, first, removedFiles(res.Actions))
	}
	return res, err
}

// actorLook is what a rewind of the actor's changes would do to each key,
// changing nothing.
func (s *Store) actorLook(ctx context.Context, keys []string, steps map[string]*actorStep, o RewindOptions) ([]RewindAction, error) {
	var out []RewindAction
	for i, key := range keys {
		if ctx.Err() != nil {
			return out, fail(ReasonAborted, "rewind", "")
		}
		if o.Progress != nil {
			o.Progress(i, 2*len(keys))
		}
		st := steps[key]
		if st.later != nil {
			out = append(out, st.conflict(key, o.Actor))
			continue
		}
		a, ok := s.rewindOne(ctx, key, st.first, &st.last, true, o.Writer)
		if ok {
			a.ActorVersion, a.InGit = st.last, inGit(key)
			out = append(out, a)
		}
	}
	return out, nil
}

// actorApply changes the keys not conflicted, recording each in res.
func (s *Store) actorApply(ctx context.Context, keys []string, steps map[string]*actorStep, conflicted map[string]bool, o RewindOptions, res *RewindResult) error {
	for i, key := range keys {
		if ctx.Err() != nil {
			return fail(ReasonAborted, "rewind", "")
		}
		if o.Progress != nil {
			o.Progress(len(keys)+i, 2*len(keys))
		}
		if conflicted[key] {
			continue
		}
		st := steps[key]
		a, ok := s.rewindOne(ctx, key, st.first, &st.last, false, o.Writer)
		if !ok {
			continue
		}
		if err := stopOnIndex(key, a.Err); err != nil {
			return err
		}
		if a.Err != nil {
			res.Conflicts++
		}
		a.ActorVersion, a.InGit = st.last, inGit(key)
		res.Actions = append(res.Actions, a)
	}
	if o.Progress != nil {
		o.Progress(2*len(keys), 2*len(keys))
	}
	return nil
}

// conflict is the action of a path another writer changed after the actor.
func (st *actorStep) conflict(key, actor string) RewindAction {
	a := RewindAction{Path: key, From: st.now, To: st.first.Prev, ActorVersion: st.last, InGit: inGit(key),
		ChangedBy: &st.later.Writer, Err: &ActorConflict{Actor: actor, By: st.later.Writer}}
	switch {
	case st.first.Prev.IsZero():
		a.Op = "remove"
	case st.now.IsZero():
		a.Op = "recreate"
	default:
		a.Op = "restore"
	}
	return a
}
