package versionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// This file keeps the index in step with the files: recording versions that
// tools produced, changes found behind the store's back, deletions, and the
// files being written through the mount, whose changes are their writers'
// to commit (mountwriters.go).

// change is one index update for a path.
type change struct {
	version Version // zero: the path is absent
	fp      fingerprint
	size    int64
	writer  Writer
	at      time.Time
	// data, when set, are the bytes of version, to keep in the object store.
	data []byte
	// statFirst: fp was taken before the bytes were read (readForCapture),
	// so a later equal stat on a filesystem of fine ctimes proves them
	// unchanged (statProves). A fingerprint taken after the store wrote the
	// file (a tool's publish, a restore) proves nothing of a write that
	// landed between the two.
	statFirst bool
	// packed, when set, is data as the store keeps them, compressed by the
	// goroutine that queued the change (packAhead) instead of by the
	// batch's commit; data is then nil.
	packed *packed
	// created says the writer saw the path without a file just before: the
	// change is a creation even though the index had no entry.
	created bool
	// keepOnly keeps data and records nothing: the bytes of a file the
	// mount is writing, which its own commit will attribute.
	keepOnly bool
	// from and to, for a change that is half of a rename: the path the
	// file came from, or went to.
	from, to string
	// unkept, if set, is why version's bytes were read but not kept (see
	// unkept.go).
	unkept byte
	// also run in the transaction that records the change (AlsoCommit).
	also []AlsoCommit
	// unsettled, for a tool's publish not yet synced, is what recovery
	// needs to finish it (settle.go). Any other change drops key's record.
	unsettled *unsettled
}

// record applies c to the index entry of key. A change to a different version
// (or to or from absence) is appended to the history and to the journal; a
// change that only refreshes the fingerprint is not. A file the index did not
// know, found by anyone but a writer who just created it, is a first
// sighting: history, but not the journal. A tool or the mount changing a
// file the index did not know journals the change with its prior version
// unknown.
func (s *Store) record(tx *bolt.Tx, key string, c change) error {
	s.retain.revived.note(c.version) // a running collection keeps its bytes
	r, found, err := getRecord(tx, key)
	if err != nil {
		return err
	}
	if !found && c.version.IsZero() {
		return nil // nothing known, nothing to forget
	}
	if !found || r.Version != c.version {
		e := HistoryEntry{Version: c.version, Size: c.size, Time: c.at.UTC(), Writer: c.writer, Deleted: c.version.IsZero(), Owner: c.fp.owner()}
		if !found && !c.created && c.writer.Kind == WriterExternal {
			e.Writer = Baseline // a first sighting: the file as dshfs found it
		}
		if err := appendHistory(tx, key, &r, e, s.historyLimit); err != nil {
			return err
		}
		j := JournalEntry{Path: key, Prev: r.Version, Version: c.version, Size: c.size, Time: e.Time, Writer: c.writer, From: c.from, To: c.to}
		if !r.Version.IsZero() {
			j.PrevOwner = r.FP.owner()
		}
		switch {
		case found, c.created:
			err = journal(tx, j)
		case c.writer.Kind != WriterExternal:
			j.PrevUnknown = true
			err = journal(tx, j)
		}
		if err != nil {
			return err
		}
	} else if o, was := c.fp.owner(), r.FP.owner(); o != nil && !c.version.IsZero() && (was == nil || *o != *was) {
		if err := setNewestOwner(tx, key, r, o); err != nil {
			return err
		}
	}
	r.Version, r.FP, r.Recorded = c.version, c.fp, c.at.UnixNano()
	if c.fp.Perm != 0 {
		r.Perm = c.fp.Perm
	}
	if c.unsettled != nil {
		err = putUnsettled(tx, key, *c.unsettled)
	} else {
		err = dropUnsettled(tx, key, c.version)
	}
	if err != nil {
		return err
	}
	return putRecord(tx, key, r)
}

// noteVersion records v, read from key whose descriptor had fingerprint fp,
// as an external change if the index disagrees, and keeps data, the bytes
// read, if set. It is called without the file's lock, so it re-checks under
// the lock that the file is still the one that was read; if not, the next
// access will reconcile it.
func (s *Store) noteVersion(key string, fp fingerprint, v Version, at time.Time, data []byte) {
	if data == nil {
		agrees, err := s.indexAgrees(key, fp, v)
		if err != nil || agrees {
			s.logErr("read index", key, err)
			return
		}
	}
	unlock := s.locks.Lock(key)
	defer unlock()
	fi, err := s.lstatKey(key)
	if err != nil || fingerprintOf(fi) != fp {
		return
	}
	if s.mount.writing(key) {
		return // a write through the mount is in progress: its commit attributes it
	}
	s.flushPending() // the mount's commit of these bytes may wait in its batch
	c := change{version: v, fp: fp, size: fi.Size(), writer: External, at: at, data: data}
	agrees, err := s.indexAgrees(key, fp, v)
	if err != nil {
		s.logErr("read index", key, err)
		return // what cannot be read cannot be updated either
	}
	if agrees {
		kept, err := s.kept(v)
		if err != nil || data == nil || kept {
			s.logErr("read index", key, err)
			return
		}
		c.keepOnly = true
	}
	s.logErr("record external change", key, s.commit([]string{key}, []change{c}))
}

// indexAgrees reports whether the index already holds v with fingerprint fp.
// A publish's fingerprint not yet settled counts (matchesRecord).
func (s *Store) indexAgrees(key string, fp fingerprint, v Version) (agrees bool, err error) {
	var r record
	var found bool
	err = s.db.View(func(tx *bolt.Tx) (err error) {
		r, found, err = getRecord(tx, key)
		return err
	})
	return err == nil && found && r.Version == v && s.matchesRecord(key, r, fp), err
}

// noteAbsent records that key was found missing, if the index thought otherwise.
func (s *Store) noteAbsent(key string) {
	unlock := s.locks.Lock(key)
	s.settleUnder(key, false)
	defer unlock()
	if _, err := s.lstatKey(key); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	s.flushPending() // the mount's record of the deletion may wait in its batch
	s.logErr("record deletion", key, s.db.Update(func(tx *bolt.Tx) error {
		return s.record(tx, key, change{writer: External, at: s.now()})
	}))
}

func (s *Store) logErr(what, key string, err error) {
	if err != nil {
		s.log.Error(what, "path", key, "err", err)
	}
}

// current is what the store knows of a file under its lock: the version of
// its bytes now. Callers hold the file's lock.
type current struct {
	fi      fs.FileInfo // nil when absent
	version Version
}

// probeLocked returns the version of key now. A clean, non-racy index entry
// whose fingerprint matches the file is trusted; anything else is rehashed
// from disk and, if it changed, recorded as written by w.
func (s *Store) probeLocked(t Target, verb string, w Writer) (current, error) {
	fi, err := s.statTarget(t, verb)
	if err != nil || fi == nil {
		if err == nil {
			s.commitChange(t.Key, change{writer: w, at: s.now()})
		}
		return current{}, err
	}
	if !fi.Mode().IsRegular() {
		return current{fi: fi}, nil
	}
	fp := fingerprintOf(fi)
	var trusted Version
	writing := s.mount.writing(t.Key)
	err = s.db.View(func(tx *bolt.Tx) error {
		r, found, err := getRecord(tx, t.Key)
		if found && r.FP == fp && !fp.racy(r.Recorded) {
			trusted = r.Version
		}
		return err
	})
	if err != nil {
		return current{}, indexReadError(verb, t.Display, err)
	}
	if !trusted.IsZero() && !writing {
		return current{fi: fi, version: trusted}, nil
	}
	at := s.now()
	f, ofi, err := s.openRegular(t, verb)
	if err != nil {
		return current{}, err
	}
	defer f.Close()
	v, err := s.versionOf(f, ofi)
	if err != nil {
		return current{}, osError(verb, t.Display, err)
	}
	s.commitChange(t.Key, change{version: v, fp: fingerprintOf(ofi), size: ofi.Size(), writer: w, at: at})
	return current{fi: ofi, version: v}, nil
}

// commitChange records c for key now, unless the mount is writing key:
// its commit will attribute the change.
func (s *Store) commitChange(key string, c change) {
	if s.mount.writing(key) {
		return
	}
	s.settleUnder(key, false)
	s.logErr("update index", key, s.db.Update(func(tx *bolt.Tx) error { return s.record(tx, key, c) }))
}

// treeKeys lists the index keys of root and below it.
func treeKeys(tx *bolt.Tx, root string) []string {
	files := tx.Bucket(bucketFiles)
	var keys []string
	if files.Get([]byte(root)) != nil {
		keys = append(keys, root)
	}
	prefix := []byte(root + "/")
	c := files.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, string(k))
	}
	return keys
}

// moveTree moves the entries below from to below to.
func moveTree(tx *bolt.Tx, from, to string) error {
	for _, k := range treeKeys(tx, from) {
		if err := moveEntry(tx, k, to+strings.TrimPrefix(k, from)); err != nil {
			return err
		}
	}
	return nil
}

// treeVersions maps every key below the given roots to its record.
func treeVersions(tx *bolt.Tx, roots ...string) (map[string]record, error) {
	out := map[string]record{}
	for _, root := range roots {
		for _, k := range treeKeys(tx, root) {
			r, _, err := getRecord(tx, k)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
	}
	return out, nil
}

// journalTrees journals, for every path below a and b, the change from its
// version in before to its version now.
func journalTrees(tx *bolt.Tx, before map[string]record, a, b string, at time.Time, w Writer) error {
	paths := map[string]bool{}
	for k := range before {
		paths[k] = true
	}
	for _, root := range []string{a, b} {
		for _, k := range treeKeys(tx, root) {
			paths[k] = true
		}
	}
	sorted := make([]string, 0, len(paths))
	for k := range paths {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		r, _, err := getRecord(tx, k)
		if err != nil {
			return err
		}
		prev := before[k]
		if r.Version == prev.Version {
			continue
		}
		e := JournalEntry{Path: k, Prev: prev.Version, Version: r.Version, Time: at, Writer: w}
		if !prev.Version.IsZero() {
			e.PrevOwner = prev.FP.owner()
		}
		if other, ok := swapRoot(k, a, b); ok && r.Version.IsZero() {
			e.To = other
		} else if ok {
			e.From = other
		}
		if err := journal(tx, e); err != nil {
			return err
		}
	}
	return nil
}

// swapRoot maps a path below root a to the same place below b, or below b
// to below a: where a file of a moved tree came from, or went.
func swapRoot(k, a, b string) (string, bool) {
	for _, r := range [][2]string{{a, b}, {b, a}} {
		if k == r[0] {
			return r[1], true
		}
		if rest, ok := strings.CutPrefix(k, r[0]+"/"); ok {
			return r[1] + "/" + rest, true
		}
	}
	return "", false
}

// History returns the versions of key, newest first, each marked with
// whether its bytes are kept. It reads the index only: Look first brings
// key's entry up to date with its file. A file being written through the
// mount is waited for, up to writerGrace, as a tool's change is: its last
// writer's release commits its version (with kernel passthrough, the only
// commit), and the kernel sends it after close(2) has returned, so the
// history of a file a shell command just wrote would miss it.
func (s *Store) History(key string) ([]HistoryEntry, error) {
	s.mount.awaitWriters(context.Background(), key)
	s.flushPending()
	var out []HistoryEntry
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		if out, err = readHistory(tx, key); err != nil {
			return err
		}
		for i := range out {
			out[i].Kept = !out[i].Version.IsZero() && hasObject(tx, out[i].Version)
			out[i].NotKept = s.notKept(tx, out[i].Version, out[i].Size)
		}
		return nil
	})
	return out, err
}

// Stats counts the index.
type Stats struct {
	Files   int // paths with a present version
	Writing int // files being written through the mount now
	// Commits counts the index transactions committed since Open, each
	// durable (two fdatasyncs), shared by the callers that came together.
	Commits uint64
}

// Stats counts the index entries.
func (s *Store) Stats() (Stats, error) {
	s.flushPending()
	st := Stats{Writing: s.mount.writingCount(), Commits: s.commits.done.Load()}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFiles).ForEach(func(k, v []byte) error {
			r, err := decodeRecord(v)
			if err != nil {
				return fmt.Errorf("decode index entry %q: %w", k, err)
			}
			if !r.Version.IsZero() {
				st.Files++
			}
			return nil
		})
	})
	return st, err
}

// snapshot is a file's state as read under its lock.
type snapshot struct {
	fi      fs.FileInfo // nil when absent
	fp      fingerprint
	version Version
	data    []byte // the bytes hashed, when the file was read whole
	at      time.Time
	// statOnly: the file exists but was not hashed; version is unknown.
	statOnly bool
}

// snapshotLocked reads key's state under its lock. A regular file smaller
// than keep (any size if keep < 0) is read whole and hashed; a larger one
// is versioned through probeLocked's trusted fingerprint or a streaming hash.
func (s *Store) snapshotLocked(t Target, verb string, keep int64) (snapshot, error) {
	at := s.now() // before the stat, for the racy rule
	fi, err := s.statTarget(t, verb)
	if err != nil || fi == nil || !fi.Mode().IsRegular() || keep == statOnly {
		return snapshot{fi: fi, at: at, statOnly: fi != nil}, err
	}
	if keep < 0 && !s.objects.hashes(fi.Size()) {
		return snapshot{}, s.unhashedFailure(verb, t, fi.Size()) // not read whole: see unhashed.go
	}
	if keep < 0 || fi.Size() < keep {
		// Read whole up to what the stat promised: past keep the file is
		// hashed as it streams; with any size allowed, a file that grew
		// more than a little while being read has changed under the caller.
		limit := keep - 1
		if keep < 0 {
			limit = fi.Size() + 1<<20
		}
		data, ofi, err := s.readWhole(t, verb, limit)
		switch {
		case CodeOf(err) == CodeNotFound:
			return snapshot{at: at}, nil // deleted since the stat
		case errors.Is(err, errGrew) && keep < 0:
			return snapshot{}, fail(ReasonChanged, verb, t.Display)
		case errors.Is(err, errGrew):
			break // hashed as it streams, below
		case err != nil:
			return snapshot{}, err
		default:
			return snapshot{fi: ofi, fp: fingerprintOf(ofi), version: Sum(data), data: data, at: at}, nil
		}
	}
	c, err := s.probeLocked(t, verb, External)
	if err != nil {
		return snapshot{}, err
	}
	return snapshot{fi: c.fi, fp: fingerprintOf(c.fi), version: c.version, at: at}, nil
}

// statOnly as snapshotLocked's keep asks for the file's stat alone.
const statOnly = -2

// recordSnapshot records what a snapshot saw: a new version or a deletion
// found behind the store's back. Non-regular files are not indexed.
func (s *Store) recordSnapshot(tx *bolt.Tx, key string, snap snapshot) error {
	if snap.statOnly || snap.fi != nil && !snap.fi.Mode().IsRegular() {
		return nil
	}
	if s.mount.writing(key) {
		return nil // the mount's commit will attribute it
	}
	return s.record(tx, key, change{version: snap.version, fp: snap.fp, size: sizeOf(snap.fi), writer: External, at: snap.at})
}

// recordSeen records a snapshot on its own, when no publish follows it. It
// skips the transaction when the index already agrees.
func (s *Store) recordSeen(key string, snap snapshot) {
	if snap.statOnly || snap.fi != nil && !snap.fi.Mode().IsRegular() {
		return
	}
	if snap.fi != nil {
		agrees, err := s.indexAgrees(key, snap.fp, snap.version)
		if err != nil || agrees {
			s.logErr("read index", key, err)
			return
		}
	}
	s.settleUnder(key, false)
	s.logErr("update index", key, s.db.Update(func(tx *bolt.Tx) error {
		return s.recordSnapshot(tx, key, snap)
	}))
}

func sizeOf(fi fs.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.Size()
}
