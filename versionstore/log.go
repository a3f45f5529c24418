package versionstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The workspace's log: the journal read back for people, newest first —
// every change to every path, whoever made it.

// ChangeQuery selects changes from the journal.
type ChangeQuery struct {
	// After keeps the changes after this journal position (a checkpoint's
	// Seq); 0 keeps all.
	After uint64
	// Since keeps the changes made at or after this time.
	Since time.Time
	// Paths keeps the changes to these paths and below them (none: all).
	Paths []string
	// Limit bounds the number of changes returned (0: no bound).
	Limit int
}

// Change is a journal entry as the log shows it.
type Change struct {
	JournalEntry
	// Op is what happened to the path: "create", "write", "delete", or
	// "rename" (to this path From, or from this path To).
	Op string `json:"op"`
	// Kept says the bytes of Version are in the object store, NotKept
	// why not.
	Kept    bool   `json:"kept,omitempty"`
	NotKept string `json:"not_kept,omitempty"`
	// Via is the temporary path a rename-save wrote the bytes through
	// (logfold.go).
	Via string `json:"via,omitempty"`
}

// Changes returns the changes q selects, newest first, with the steps of a
// replacement folded into one change (logfold.go).
func (s *Store) Changes(q ChangeQuery) ([]Change, error) {
	limit := q.Limit
	if limit > 0 {
		q.Limit = 4*limit + 8 // room for the steps folded away
	}
	out, err := s.changes(q)
	if err != nil {
		return nil, err
	}
	out = foldSteps(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// changes is the journal entries q selects, newest first, as they are.
// The files being written through the mount are waited for, up to
// writerGrace, as History waits for one: a write whose close(2) has
// returned is committed by a release the kernel sends later.
func (s *Store) changes(q ChangeQuery) ([]Change, error) {
	s.mount.awaitIdle(context.Background())
	s.flushPending()
	var out []Change
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketJournal).Cursor()
		for k, v := c.Last(); k != nil && binary.BigEndian.Uint64(k) > q.After; k, v = c.Prev() {
			e, err := decodeJournal(v)
			if err != nil {
				return fmt.Errorf("decode journal entry %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if e.Time.Before(q.Since) {
				break // the journal is in time order
			}
			if !q.selects(e) {
				continue
			}
			out = append(out, Change{JournalEntry: e, Op: e.op(), Kept: !e.Version.IsZero() && hasObject(tx, e.Version),
				NotKept: s.notKept(tx, e.Version, e.Size)})
			if q.Limit > 0 && len(out) == q.Limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// selects reports whether e is about one of q's paths (either side of a
// rename counts).
func (q ChangeQuery) selects(e JournalEntry) bool {
	if len(q.Paths) == 0 {
		return true
	}
	for _, p := range q.Paths {
		for _, k := range []string{e.Path, e.From, e.To} {
			if k != "" && within(k, p) {
				return true
			}
		}
	}
	return false
}

// within reports whether key is root or below it ("." holds everything).
func within(key, root string) bool {
	return root == "." || key == root || strings.HasPrefix(key, root+"/")
}

func (e JournalEntry) op() string {
	switch {
	case e.From != "" || e.To != "":
		return "rename"
	case e.Version.IsZero():
		return "delete"
	case e.Prev.IsZero() && !e.PrevUnknown:
		return "create"
	}
	return "write"
}

// FileChange is what became of one path over the changes a query selects.
type FileChange struct {
	Path string `json:"path"`
	// Before is the path's version before the first change, After after
	// the last (zero: no file). BeforeUnknown: the first change came before
	// dshfs had seen the file.
	Before        Version `json:"before"`
	BeforeUnknown bool    `json:"before_unknown,omitempty"`
	After         Version `json:"after"`
	// From is where a file created by a rename came from; To is where a
	// file renamed away went.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// BeforePerm and AfterPerm are the file's permission bits before and
	// after, where known (zero: not known), for a diff's modes.
	BeforePerm fs.FileMode `json:"before_perm,omitempty"`
	AfterPerm  fs.FileMode `json:"after_perm,omitempty"`
}

// Changed sums up, path by path in path order, the changes q selects (its
// Limit is ignored): a session's changes as one review. A path that ends as
// it began is left out.
func (s *Store) Changed(q ChangeQuery) ([]FileChange, error) {
	q.Limit = 0
	all, err := s.Changes(q)
	if err != nil {
		return nil, err
	}
	byPath := map[string]*FileChange{}
	var order []string
	for i := len(all) - 1; i >= 0; i-- { // oldest first
		e := all[i].JournalEntry
		fc := byPath[e.Path]
		if fc == nil {
			fc = &FileChange{Path: e.Path, Before: e.Prev, BeforeUnknown: e.PrevUnknown, From: e.From}
			if e.PrevOwner != nil {
				fc.BeforePerm = e.PrevOwner.Perm
			}
			byPath[e.Path] = fc
			order = append(order, e.Path)
		}
		fc.After, fc.To = e.Version, e.To
	}
	sort.Strings(order)
	if err := s.lastPerms(byPath); err != nil {
		return nil, err
	}
	var out []FileChange
	for _, p := range order {
		if fc := byPath[p]; fc.Before != fc.After || fc.BeforeUnknown {
			out = append(out, *fc)
		}
	}
	return out, nil
}

// lastPerms fills in each change's AfterPerm, and its BeforePerm where the
// journal had none, from the permission bits the index last saw the file
// with (kept after a deletion).
func (s *Store) lastPerms(byPath map[string]*FileChange) error {
	return s.db.View(func(tx *bolt.Tx) error {
		for key, fc := range byPath {
			r, found, err := getRecord(tx, key)
			if err != nil || !found {
				continue
			}
			if !fc.After.IsZero() {
				fc.AfterPerm = r.Perm
			} else if fc.BeforePerm == 0 {
				fc.BeforePerm = r.Perm
			}
		}
		return nil
	})
}
