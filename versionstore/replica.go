package versionstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// What a replica of the history needs from the store, and what puts a
// replica's history into a new one (versionstore/remote ships and fetches
// it): the journal in order from a position, and the import of a journal,
// its checkpoints and the bytes of their versions into an empty index.

// ErrNotEmpty is wrapped by the error of an import into a store whose
// journal has entries already.
var ErrNotEmpty = errors.New("the journal is not empty")

// JournalAfter returns the journal entries after seq, oldest first, at most
// limit of them (0: all).
func (s *Store) JournalAfter(seq uint64, limit int) ([]JournalEntry, error) {
	s.flushPending()
	return s.CommittedJournalAfter(seq, limit)
}

// CommittedJournalAfter is JournalAfter without committing the mount's
// queued versions first: the entries committed now. A replica that reads
// it follows the mount's own commits (a batch at most every
// DefaultMountBatchInterval) instead of forcing smaller ones, each a
// transaction and a sync, while the mount is busy.
func (s *Store) CommittedJournalAfter(seq uint64, limit int) ([]JournalEntry, error) {
	var out []JournalEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketJournal).Cursor()
		for k, v := c.Seek(journalKey(seq + 1)); k != nil; k, v = c.Next() {
			var e JournalEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode journal entry %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if out = append(out, e); limit > 0 && len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// JournalSeq is the number of the journal's last entry.
func (s *Store) JournalSeq() (seq uint64, err error) {
	s.flushPending()
	err = s.db.View(func(tx *bolt.Tx) error {
		seq = journalSeq(tx)
		return nil
	})
	return seq, err
}

// ImportHistory puts a history read back from a replica into this store,
// whose journal must be empty: the entries keep their numbers (the
// journal goes on after the last), the checkpoints their positions, and
// every object is checked against its version before it is kept. Only the
// history is imported: the workspace's files and their index records are
// not touched.
func (s *Store) ImportHistory(entries []JournalEntry, cps []Checkpoint, objects map[Version][]byte) error {
	now := time.Now()
	s.objects.files.RLock() // as a commit does: no collection meanwhile
	defer s.objects.files.RUnlock()
	var objs []packed
	for v, data := range objects {
		if Sum(data) != v {
			return fmt.Errorf("import object %s: %w", v, ErrCorrupt)
		}
		p := s.objects.pack(v, data, now)
		if p.file != nil {
			if err := s.objects.writeFile(p); err != nil {
				return fmt.Errorf("import object %s: %w", v, err)
			}
		}
		objs = append(objs, p)
	}
	var added int64
	err := s.db.Update(func(tx *bolt.Tx) error {
		added = 0
		j := tx.Bucket(bucketJournal)
		if journalSeq(tx) != 0 || j.Stats().KeyN != 0 {
			return ErrNotEmpty
		}
		for _, p := range objs {
			n, err := putObject(tx, p)
			if err != nil {
				return err
			}
			added += n
		}
		return importJournal(tx, entries, cps)
	})
	if err != nil {
		return fmt.Errorf("import history: %w", err)
	}
	s.objectsAdded(added)
	return nil
}

// importJournal writes entries under their own numbers and the checkpoints.
func importJournal(tx *bolt.Tx, entries []JournalEntry, cps []Checkpoint) error {
	j := tx.Bucket(bucketJournal)
	var last uint64
	for _, e := range entries {
		if e.Seq <= last {
			return fmt.Errorf("journal entry %d after %d: out of order", e.Seq, last)
		}
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := j.Put(journalKey(e.Seq), v); err != nil {
			return err
		}
		last = e.Seq
	}
	if err := j.SetSequence(last); err != nil {
		return err
	}
	b := tx.Bucket(bucketCheckpoints)
	for _, cp := range cps {
		v, err := json.Marshal(cp)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(cp.Name), v); err != nil {
			return err
		}
	}
	return nil
}
