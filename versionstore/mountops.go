package versionstore

import (
	"errors"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// The operations only the mount calls: each reports a change the mount
// makes (a write, a creation, a rename, a directory's move) as it makes
// it, under the locks lockorder.go names.

// Preserve makes sure the current bytes of key are kept before the mount
// changes it: before a write, truncation, unlink or rename. A file the index
// does not know, or whose bytes are not kept, is read now (up to the
// capture limit) and recorded as found. It reports whether key had no file:
// a caller that then creates one says so with Created. Callers hold key's
// lock.
func (m *Mount) Preserve(key string) (absent bool) {
	return m.s.preserveLocked(key, true)
}

// Created tells the store that the mount just created a regular file at
// key, which Preserve found absent: its commit is journaled as a creation,
// and nothing is kept before its first change. Callers hold key's lock; a
// Refresh of key must follow.
func (m *Mount) Created(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bornAbsent == nil {
		m.bornAbsent = make(map[string]bool)
	}
	m.bornAbsent[key] = true
}

// NoteRename tells the store that a file was renamed through the mount
// from oldKey to newKey: the next commits of the two paths are journaled as
// the halves of one rename. Callers hold both keys' locks.
func (m *Mount) NoteRename(oldKey, newKey string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.renames == nil {
		m.renames = make(map[string]rename)
	}
	m.renames[newKey] = rename{from: oldKey}
	m.renames[oldKey] = rename{to: newKey}
}

// Refresh rehashes key from disk and records its version as written by w if
// it changed (a deletion if it is gone), keeping its bytes. Callers hold the
// file's lock.
func (m *Mount) Refresh(key string, w Writer) (Version, error) {
	s := m.s
	// The commit joins the pending batch behind any earlier commit of key,
	// so its history stays in order without a transaction of its own.
	born := m.takeBornAbsent(key)
	from, to := m.takeRename(key)
	if fi, err := s.lstatKey(key); err == nil && !fi.Mode().IsRegular() {
		// A symlink, FIFO or directory has no version of its own (and a
		// symlink's target is another path's business): the path holds no
		// file now, which is a deletion if the index had one.
		m.enqueue(key, change{writer: w, at: s.now(), to: to})
		return Version{}, nil
	}
	c, err := s.readForCapture(Target{Key: key, Display: key}, s.now(), w, true)
	if err != nil {
		switch code := CodeOf(err); {
		case code == CodeNotFound || errors.Is(err, syscall.ENOTDIR):
			m.enqueue(key, change{writer: w, at: s.now(), to: to}) // a deletion
			return Version{}, nil
		case code == CodeNotRegularFile:
			err = nil // a directory or device now: no version to keep
		}
		// Nothing to commit; the next access rehashes what is there.
		return Version{}, err
	}
	c.created, c.from, c.to = born, from, to
	m.enqueue(key, c)
	return c.version, nil
}

// MoveTree moves the index entries and history of oldKey, and of every
// path below it, to newKey: a directory renamed through the mount keeps its
// files' versions without rehashing them. The journal records each move as
// a deletion at the old path and a change at the new one, attributed to w.
// Callers hold both keys' locks.
func (m *Mount) MoveTree(oldKey, newKey string, w Writer) error {
	if oldKey == newKey {
		return nil
	}
	s := m.s
	m.flush()
	m.moveMarks(oldKey, newKey, false)
	s.moveSettling(oldKey, newKey, false)
	at := s.now().UTC()
	return s.db.Update(func(tx *bolt.Tx) error {
		before, err := treeVersions(tx, oldKey, newKey)
		if err != nil {
			return err
		}
		if err := moveTree(tx, oldKey, newKey); err != nil {
			return err
		}
		if err := moveUnsettled(tx, oldKey, newKey); err != nil {
			return err
		}
		return journalTrees(tx, before, oldKey, newKey, at, w)
	})
}

// ExchangeTree swaps the index entries of a and b and everything below
// them (RENAME_EXCHANGE of directories). Callers hold both keys' locks.
func (m *Mount) ExchangeTree(a, b string, w Writer) error {
	if a == b {
		return nil
	}
	s := m.s
	m.flush()
	m.moveMarks(a, b, true)
	s.moveSettling(a, b, true)
	at := s.now().UTC()
	return s.db.Update(func(tx *bolt.Tx) error {
		before, err := treeVersions(tx, a, b)
		if err != nil {
			return err
		}
		tmp := b + "\x00exchange" // never a path: NUL cannot occur in one
		for _, mv := range [][2]string{{a, tmp}, {b, a}, {tmp, b}} {
			if err := moveTree(tx, mv[0], mv[1]); err != nil {
				return err
			}
			if err := moveUnsettled(tx, mv[0], mv[1]); err != nil {
				return err
			}
		}
		return journalTrees(tx, before, a, b, at, w)
	})
}
