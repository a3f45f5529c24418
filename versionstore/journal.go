package versionstore

import (
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The journal is the workspace's change log: one entry per change of any
// path's version — a write, a creation, a deletion, either side of a
// rename — in commit order, each with the version it replaced. A checkpoint
// is a position in it; rewinding to a checkpoint gives each path changed
// since back the version its first later change replaced. First sightings
// of files (a read of a file never seen before) are not changes and are not
// journaled.
//
// Its buckets, journal and checkpoints, are in buckets.go.

// JournalEntry is one change, as the store hands it out; the index stores
// a diskJournal (records.go).
type JournalEntry struct {
	Seq  uint64 `json:"seq"`
	Path string `json:"path"`
	// Prev is the version the change replaced; zero for a path that had no
	// file. PrevUnknown says the store did not know it (the change came
	// before dshfs had seen the file).
	Prev        Version `json:"prev"`
	PrevUnknown bool    `json:"prev_unknown,omitempty"`
	// PrevOwner is who owned the file with Prev, and its permission bits;
	// nil: unknown (an entry of an earlier dshfs).
	PrevOwner *Owner    `json:"prev_owner,omitempty"`
	Version   Version   `json:"version"`        // zero: deleted
	Size      int64     `json:"size,omitempty"` // of Version's bytes
	Time      time.Time `json:"time"`
	Writer    Writer    `json:"writer"`
	// From and To link the halves of a rename: the change at the new path
	// names the path the file came from, the deletion at the old path the
	// path it went to.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// journal appends e, numbering it.
func journal(tx *bolt.Tx, e JournalEntry) error {
	b := tx.Bucket(bucketJournal)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	e.Seq = seq
	v, err := encodeJournal(e)
	if err != nil {
		return err
	}
	return b.Put(journalKey(seq), v)
}

// journalSeq is the number of the last entry.
func journalSeq(tx *bolt.Tx) uint64 { return tx.Bucket(bucketJournal).Sequence() }

// firstChangesAfter returns, for every path changed after seq, its first
// such change.
func firstChangesAfter(tx *bolt.Tx, seq uint64) (map[string]JournalEntry, error) {
	first := map[string]JournalEntry{}
	c := tx.Bucket(bucketJournal).Cursor()
	for k, v := c.Seek(journalKey(seq + 1)); k != nil; k, v = c.Next() {
		e, err := decodeJournal(v)
		if err != nil {
			return nil, fmt.Errorf("decode journal entry %d: %w", binary.BigEndian.Uint64(k), err)
		}
		if _, seen := first[e.Path]; !seen {
			first[e.Path] = e
		}
	}
	return first, nil
}

// AlsoCommit is work a caller of WriteText or Update adds to the durable
// index transaction that records the version it wrote (v), so both share
// one commit and its syncs: the policy records there what the writing
// actor saw. It may run more than once (groupcommit.go) and must compute
// everything from tx. Its error is logged and does not undo the version's
// record, which matters more: it must fail before changing anything, and
// its caller finds out afterwards that its work is missing.
type AlsoCommit func(tx *bolt.Tx, v Version) error

// runAlso runs c's AlsoCommit functions in tx.
func (s *Store) runAlso(tx *bolt.Tx, key string, c change) {
	for _, f := range c.also {
		if err := f(tx, c.version); err != nil {
			s.log.Error("commit with a version", "path", key, "err", err)
		}
	}
}

// storedAlready is the versions among cs carrying bytes that are kept
// already: their bytes are not packed again.
func (s *Store) storedAlready(cs []change) (stored map[Version]bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		for i := range cs {
			if cs[i].carries() && s.objects.present(tx, cs[i].version) {
				if stored == nil {
					stored = map[Version]bool{}
				}
				stored[cs[i].version] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("look up kept objects: %w", err)
	}
	return stored, nil
}

// commit records cs (in order, cs[i] for keys[i]) in one transaction,
// keeping the bytes each carries: they are compressed first, outside the
// transaction, and large ones written to their files. It returns once the
// transaction is durable; concurrent callers share it (groupcommit.go).
func (s *Store) commit(keys []string, cs []change) error {
	s.settleKeys(keys, cs)
	var objs []packed
	now := s.now()
	s.objects.files.RLock()
	defer s.objects.files.RUnlock()
	stored, err := s.storedAlready(cs)
	if err != nil {
		return err
	}
	for i := range cs {
		data, p := cs[i].data, cs[i].packed
		cs[i].data, cs[i].packed = nil, nil
		if (data == nil && p == nil) || stored[cs[i].version] {
			continue
		}
		if p == nil {
			pk := s.objects.pack(cs[i].version, data, now)
			p = &pk
		}
		if p.file != nil {
			if err := s.objects.writeFile(*p); err != nil {
				// The version is still recorded; only its bytes are not kept.
				s.log.Error("keep the bytes of a version", "path", keys[i], "err", err)
				continue
			}
		}
		objs = append(objs, *p)
	}
	var added int64                 // to the objects in files of their own
	owed := s.owedDrops(everything) // settled publishes' records ride along
	err = s.commits.update(func(tx *bolt.Tx) error {
		added = 0
		if err := dropSettled(tx, owed); err != nil {
			return err
		}
		for _, p := range objs {
			n, err := putObject(tx, p)
			if err != nil {
				return err
			}
			added += n
		}
		for i := range cs {
			if cs[i].keepOnly {
				continue
			}
			if err := s.record(tx, keys[i], cs[i]); err != nil {
				return err
			}
			if cs[i].unkept != 0 {
				if err := noteUnkept(tx, cs[i].version, cs[i].unkept); err != nil {
					return err
				}
			}
			s.runAlso(tx, keys[i], cs[i])
		}
		return nil
	})
	if err == nil {
		s.objectsAdded(added)
		s.forgetSettled(owed)
	}
	return err
}
