package versionstore

import (
	"context"
	"encoding/json"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// Recovery of merges a cut left half applied: at Open, before anything is
// served, each one is rolled back (mergeapply.go has the design).

// rollBackMerges takes back, at Open, every merge whose intent a crash
// left, and drops the intent and, once nothing of the merge is left, its
// checkpoint.
func (s *Store) rollBackMerges() error {
	var intents []mergeIntent
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMerges).ForEach(func(k, v []byte) error {
			var in mergeIntent
			if err := json.Unmarshal(v, &in); err != nil {
				// Its checkpoint stays: `dshfs rewind STEP` takes it back.
				s.log.Error("read a merge a crash interrupted: it is not rolled back", "step", string(k), "err", err)
				in.Items = nil
			}
			in.Step = string(k)
			intents = append(intents, in)
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, in := range intents {
		whole := s.rollBack(in)
		err := s.commits.update(func(tx *bolt.Tx) error {
			if whole {
				if err := tx.Bucket(bucketCheckpoints).Delete([]byte(in.Step)); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMerges).Delete([]byte(in.Step))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// rollBack puts back the workspace's bytes from before the merge in every
// file of in that shows what the merge wrote, and reports whether the
// merge is gone entirely (no file was left as it is).
func (s *Store) rollBack(in mergeIntent) bool {
	w := Writer{Kind: WriterRestore, Actor: in.Step}
	whole, undone := len(in.Items) > 0, 0 // none: an intent that did not read
	for _, it := range in.Items {
		done, err := s.rollBackOne(it, w)
		switch {
		case err != nil:
			whole = false
			s.log.Error("roll back a merge a crash interrupted", "step", in.Step, "path", it.Path, "err", err)
		case done:
			undone++
		}
	}
	s.log.Warn("rolled back a merge a crash interrupted", "step", in.Step, "files", len(in.Items), "put back", undone, "whole", whole)
	return whole
}

// errChangedSince says a merged file changed after the merge wrote it: the
// rollback leaves it.
var errChangedSince = errors.New("changed after the merge wrote it: left as it is")

// rollBackOne puts back it.Main where the file shows what the merge wrote
// (it.Branch), or what a cut may leave of it, and reports whether it did.
func (s *Store) rollBackOne(it intentItem, w Writer) (bool, error) {
	t := Target{Key: it.Path, Display: it.Path}
	unlock := s.locks.Lock(it.Path)
	defer unlock()
	s.flushPending()
	cur, err := s.snapshotLocked(t, "merge", s.objects.maxKeep+1)
	if err != nil || cur.version == it.Main {
		return false, err
	}
	if !s.mergeWrote(it, cur) {
		return false, errChangedSince
	}
	if err := s.recordMergeWrite(it, cur, w); err != nil {
		return false, err
	}
	var data []byte
	var owner *Owner
	if !it.Main.IsZero() {
		if data, err = s.Object(it.Main); err != nil {
			return false, err
		}
		if owner, err = s.versionOwner(it.Path, it.Main); err != nil {
			return false, err
		}
	}
	_, err = s.putBackLocked(context.Background(), t, it.Main, owner, data, &cur.version, w)
	return err == nil, err
}

// recordMergeWrite records cur, what the merge left at it, as the merge's
// change, when the cut came before the merge's own record of it: else the
// rollback would record it as found there, and the journal, which a merge
// reads the branch point's versions from, would start at the branch's
// bytes, which a new merge would then take for the workspace's.
func (s *Store) recordMergeWrite(it intentItem, cur snapshot, w Writer) error {
	known, found, err := s.indexRecord(it.Path)
	if err != nil || found && known == cur.version {
		return err
	}
	at := s.now()
	var keys []string
	var cs []change
	if !found && !it.Main.IsZero() {
		// The file as it was before the merge, never recorded: found there.
		keys, cs = append(keys, it.Path), append(cs, change{version: it.Main, writer: External, at: at})
	}
	c := change{version: cur.version, fp: cur.fp, size: sizeOf(cur.fi), writer: w, at: at, created: it.Main.IsZero()}
	keys, cs = append(keys, it.Path), append(cs, c)
	return s.commit(keys, cs)
}

// indexRecord is the version the index records for key, if it has a record.
func (s *Store) indexRecord(key string) (v Version, found bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		r, ok, err := getRecord(tx, key)
		v, found = r.Version, ok
		return err
	})
	return v, found, err
}

// mergeWrote reports whether cur is what the merge wrote at it, or what a
// power cut may leave of it (an empty, zero-filled or partly written file).
func (s *Store) mergeWrote(it intentItem, cur snapshot) bool {
	if cur.version == it.Branch {
		return true
	}
	if it.Branch.IsZero() || cur.fi == nil || cur.data == nil {
		return false
	}
	want, err := s.Object(it.Branch)
	return err == nil && torn(cur.data, want)
}
