package versionstore

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Snapshot is the workspace as it was at a checkpoint, read without a copy:
// a path no change has touched since is the workspace's file now; a path
// changed since had the version its first later change replaced (drift).
// A branch reads its base through one (fusefs's branch view).
type Snapshot struct {
	s   *Store
	cp  Checkpoint
	mu  sync.Mutex
	at  uint64                  // the journal position drift was computed at
	dft map[string]JournalEntry // path → its first change since cp
	dir map[string]map[string]bool
}

// SnapState is what a snapshot holds at one path.
type SnapState struct {
	// Changed says the path changed since the checkpoint: its bytes then
	// are Version's (zero: there was no file), not the workspace's now.
	Changed bool
	Version Version
	// Unknown says the version then was not known (changed before dshfs
	// had seen the file).
	Unknown bool
	// Owner is who owned the file then, and its permission bits (nil:
	// unknown).
	Owner *Owner
}

// MarkCheckpoint records a checkpoint at the journal's end without looking
// at the workspace first: O(1). Changes made behind dshfs's back that the
// watcher or the baseline have not recorded yet are not in it.
func (s *Store) MarkCheckpoint(name string) (Checkpoint, error) {
	if err := checkName(name); err != nil {
		return Checkpoint{}, err
	}
	cp, err := s.markCounting(name, false, false)
	if err != nil && !errors.Is(err, ErrCheckpointExists) {
		return cp, indexError("checkpoint", "", err)
	}
	return cp, err
}

// Snapshot returns the workspace as at checkpoint name.
func (s *Store) Snapshot(name string) (*Snapshot, error) {
	cp, err := s.findCheckpoint(name)
	if err != nil {
		return nil, err
	}
	return &Snapshot{s: s, cp: cp, at: ^uint64(0)}, nil
}

// Checkpoint is the checkpoint the snapshot shows.
func (sn *Snapshot) Checkpoint() Checkpoint { return sn.cp }

// State is what the snapshot holds at key.
func (sn *Snapshot) State(key string) (SnapState, error) {
	if err := sn.refresh(); err != nil {
		return SnapState{}, err
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	e, ok := sn.dft[key]
	if !ok {
		return SnapState{}, nil
	}
	return SnapState{Changed: true, Version: e.Prev, Unknown: e.PrevUnknown, Owner: e.PrevOwner}, nil
}

// Stale reports whether fi, the workspace's file at key now, is no longer
// what the index recorded for it, though no change to key was journaled
// since the checkpoint (State: not Changed): a write whose commit has not
// landed yet (a release the kernel sends after the close returned), or one
// made behind dshfs's back and not seen yet. Its bytes at the checkpoint
// are then the recorded version's, returned with the owner and bits the
// record saw. A file the index has no version of is not stale: there is
// nothing better to show than the file.
func (sn *Snapshot) Stale(key string, fi fs.FileInfo) (Version, *Owner, bool) {
	if !fi.Mode().IsRegular() {
		return Version{}, nil, false
	}
	var r record
	var ok bool
	err := sn.s.db.View(func(tx *bolt.Tx) (err error) {
		r, ok, err = getRecord(tx, key)
		return err
	})
	if err != nil || !ok || r.Version.IsZero() || sn.s.matchesRecord(key, r, fingerprintOf(fi)) {
		return Version{}, nil, false
	}
	return r.Version, r.FP.owner(), true
}

// Drifted lists the children of directory dir that changed since the
// checkpoint, and the subdirectories that held files then (isDir true):
// what a listing of the workspace now must be corrected by.
func (sn *Snapshot) Drifted(dir string) (map[string]bool, error) {
	if err := sn.refresh(); err != nil {
		return nil, err
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	out := map[string]bool{}
	for name, isDir := range sn.dir[dir] {
		out[name] = isDir
	}
	return out, nil
}

// refresh recomputes the drift when the journal has moved.
func (sn *Snapshot) refresh() error {
	sn.s.flushPending()
	var seq uint64
	var first map[string]JournalEntry
	err := sn.s.db.View(func(tx *bolt.Tx) (err error) {
		if seq = journalSeq(tx); seq == sn.seen() {
			return nil
		}
		first, err = firstChangesAfter(tx, sn.cp.Seq)
		return err
	})
	if err != nil || first == nil {
		return err
	}
	sn.mu.Lock()
	sn.at, sn.dft, sn.dir = seq, first, driftDirs(first)
	sn.mu.Unlock()
	return nil
}

func (sn *Snapshot) seen() uint64 {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return sn.at
}

// driftDirs indexes drift by parent directory: each changed path under its
// parent (a file), and every directory above a path that had a file then.
func driftDirs(first map[string]JournalEntry) map[string]map[string]bool {
	dirs := map[string]map[string]bool{}
	add := func(parent, name string, isDir bool) {
		if dirs[parent] == nil {
			dirs[parent] = map[string]bool{}
		}
		dirs[parent][name] = dirs[parent][name] || isDir
	}
	for key, e := range first {
		add(parentKey(key), path.Base(key), false)
		if e.Prev.IsZero() {
			continue
		}
		for p := parentKey(key); p != "."; p = parentKey(p) {
			add(parentKey(p), path.Base(p), true)
		}
	}
	return dirs
}

func parentKey(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return "."
}
