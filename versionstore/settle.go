package versionstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// A tool's write or edit is acknowledged once its index commit is durable,
// and that commit holds the new bytes (the object store keeps them inline).
// The published file itself need not be on disk yet: waiting for its fsync
// and its directory's as well as the index's doubled the cost of a small
// edit. So a small tool publish is written and renamed without syncing, and
// its commit records, in the "unsettled" bucket, what the file must be and
// what it was before. The store's loop then syncs the file and its
// directory, and the record goes with the next commit of any kind: the
// publish is settled.
//
// After a power cut, Open looks at every record left (redoUnsettled): a file
// that still shows the bytes before the publish (its rename was lost), is
// missing after a create, or came back torn — empty, zero-filled, or with
// only some of its pages (its data was lost, or part of it) — is written
// again from the kept bytes, as its owner's file, durably, before anything
// is served. A file showing anything else was changed after the publish,
// and that change is kept as it is.
//
// Every change to a file with a record waits for its publish to be synced
// first, so a later change can never be taken for a lost publish: a tool's
// next publish (its record replaces the old), any commit naming the path
// (it drops the record), and the mount's changes (Preserve, which every
// write, truncation, unlink and rename through the mount calls, and which
// also drops the record durably, since the mount's version is committed
// only later). Only a process writing straight into the backing directory
// within the moment between a publish and its sync goes unordered.

// unsettledLimit is the largest publish that may be acknowledged before its
// file is synced: its bytes always fit inline in the index (inlineLimit).
const unsettledLimit = 256 << 10

// unsettled is what a publish not yet on disk must leave, and what the
// file may show if the publish was lost: the version it replaced and, when
// that was an unsettled publish of the same tool sequence too, the ones
// before it (Before, newest first); NoFile when one of them was no file.
// Seq tells publishes apart: the same bytes published again, after other
// ones, have the same version, and a sync before the later rename does not
// settle it.
type unsettled struct {
	Version Version     `json:"version"`
	Before  []Version   `json:"before,omitempty"`
	NoFile  bool        `json:"no_file,omitempty"`
	Size    int64       `json:"size"`
	Perm    fs.FileMode `json:"perm"`
	Seq     uint64      `json:"seq,omitempty"`
}

// maxBefore bounds a record's chain of unsettled versions: past it, the
// earlier publish is synced first.
const maxBefore = 8

// unsettledOver is the record of a publish over cur at key. When key's
// last publish is not synced yet and cur is what it left, the new record
// inherits its chain instead of waiting for its syncs (back-to-back edits
// of one file); any other unsettled publish there is synced first, so it
// can never be taken for this one lost. Callers hold key's lock.
func (s *Store) unsettledOver(key string, cur snapshot) *unsettled {
	u := &unsettled{NoFile: cur.fi == nil}
	if cur.fi != nil {
		u.Before = []Version{cur.version}
	}
	if s.settle.count.Load() == 0 {
		return u
	}
	s.settle.mu.Lock()
	p, ok := s.settle.pending[key]
	s.settle.mu.Unlock()
	switch {
	case !ok:
	case !p.synced && cur.fi != nil && p.Version == cur.version && len(p.Before) < maxBefore:
		u.Before = append(u.Before, p.Before...)
		u.NoFile = p.NoFile
	default:
		s.settleUnder(key, false)
	}
	return u
}

// settler tracks the unsettled publishes in memory. A publish is first
// pending (its file and directory to be synced), then synced: its record
// is owed a deletion, which rides the next index commit (commit), or the
// settler's own commit right after the sync (flushLoop), or, when a change
// is about to follow, a commit of its own.
type settler struct {
	mu      sync.Mutex
	pending map[string]settling
	count   atomic.Int64 // len(pending), read without mu on the hot paths
	kick    chan struct{}
	seq     atomic.Uint64 // the last publish's Seq
}

type settling struct {
	unsettled
	synced bool
	// recFP is the fingerprint its commit recorded (the temp file's,
	// before the rename) and fp the one the rename left: the drop of the
	// record sets it, so later stats trust it.
	recFP, fp fingerprint
}

// matchesRecord reports whether a file with fingerprint fp is the one the
// index entry r names. A small tool publish commits its record with its
// temp file's fingerprint, before the rename that moves the file's ctime;
// until its settler's commit puts the fingerprint the rename left in the
// entry, that one (held in memory by the pending publish) counts as the
// record's too. Without it, every read between a publish and its settling
// would record the same version again, durably, inside the read.
func (s *Store) matchesRecord(key string, r record, fp fingerprint) bool {
	if r.FP == fp {
		return true
	}
	if s.settle.count.Load() == 0 || fp == (fingerprint{}) {
		return false
	}
	s.settle.mu.Lock()
	p, ok := s.settle.pending[key]
	s.settle.mu.Unlock()
	return ok && p.Version == r.Version && p.recFP == r.FP && p.fp == fp
}

// owedDrop is a synced publish whose record a commit may delete.
type owedDrop struct {
	seq       uint64
	version   Version
	recFP, fp fingerprint
}

func (st *settler) init() {
	st.pending = map[string]settling{}
	st.kick = make(chan struct{}, 1)
}

// deferrable reports whether a tool publish of n bytes may be acknowledged
// before its file is synced: its bytes are kept inline with the commit.
func (s *Store) deferrable(n int) bool {
	return !s.syncPublishes && n <= unsettledLimit && s.objects.keeps(int64(n))
}

// noteUnsettled remembers key's unsettled publish, whose record has just
// committed with fingerprint recFP and whose rename left fp, and wakes the
// settler (flushLoop).
func (s *Store) noteUnsettled(key string, u unsettled, recFP, fp fingerprint) {
	s.settle.mu.Lock()
	if _, ok := s.settle.pending[key]; !ok {
		s.settle.count.Add(1)
	}
	s.settle.pending[key] = settling{unsettled: u, recFP: recFP, fp: fp}
	s.settle.mu.Unlock()
	select {
	case s.settle.kick <- struct{}{}:
	default:
	}
}

// settleUnder syncs the publishes at key and below it before a change
// there; with drop, their records are deleted durably too, for a change
// that no commit records yet (the mount's). An error is logged: the change
// goes ahead, and the record stays for the next try.
func (s *Store) settleUnder(key string, drop bool) {
	if s.settle.count.Load() == 0 {
		return
	}
	s.logErr("settle tool writes", key, s.settleWhere(func(k string) bool { return under(k, key) }, drop))
}

// settleKeys syncs the publishes of keys that a commit is about to record,
// unless the commit is the publish itself; the commit drops their records.
func (s *Store) settleKeys(keys []string, cs []change) {
	if s.settle.count.Load() == 0 {
		return
	}
	mine := map[string]bool{} // a publish's own commit: its record replaces the old
	for i, k := range keys {
		if cs[i].unsettled != nil {
			mine[k] = true
		}
	}
	for _, k := range keys {
		if !mine[k] {
			s.settleUnder(k, false)
		}
	}
}

// settleWhere syncs the file and directory of every pending publish whose
// key match accepts (a file that is gone is settled by its directory's
// sync), and with drop deletes their records in a commit of its own.
func (s *Store) settleWhere(match func(string) bool, drop bool) error {
	s.settle.mu.Lock()
	var todo []string
	found := false
	for k, p := range s.settle.pending {
		if match(k) {
			found = true
			if !p.synced {
				todo = append(todo, k)
			}
		}
	}
	s.settle.mu.Unlock()
	if !found {
		return nil
	}
	var errs []error
	synced := map[string]bool{} // directories
	for _, k := range todo {
		s.settle.mu.Lock()
		p := s.settle.pending[k]
		s.settle.mu.Unlock()
		if err := s.syncKey(k, synced); err != nil && !s.goneWithItsDir(k, err) {
			if !errors.Is(err, errKeyDirGone) {
				errs = append(errs, err)
			}
			continue
		}
		s.settle.mu.Lock()
		if cur, ok := s.settle.pending[k]; ok && cur.Seq == p.Seq {
			cur.synced = true
			s.settle.pending[k] = cur
		}
		s.settle.mu.Unlock()
	}
	if drop {
		owed := s.owedDrops(match)
		if len(owed) > 0 {
			err := s.commits.update(func(tx *bolt.Tx) error { return dropSettled(tx, owed) })
			if err != nil {
				errs = append(errs, fmt.Errorf("drop settled records: %w", err))
			} else {
				s.forgetSettled(owed)
			}
		}
	}
	return errors.Join(errs...)
}

// goneWithItsDir reports whether err says k's publish went with its
// directory, removed or made a link: nothing is left to sync, and a record
// kept would make the next open put the file back. A directory being
// renamed (a lock above k is held: the mount's rename holds it until the
// index follows) is not gone: its publishes move with it (moveSettling),
// and are settled at the new path.
func (s *Store) goneWithItsDir(k string, err error) bool {
	return errors.Is(err, errKeyDirGone) && !s.locks.heldAbove(k)
}

// owedDrops lists the synced publishes match accepts (their Seq), whose
// records a commit may delete.
func (s *Store) owedDrops(match func(string) bool) map[string]owedDrop {
	if s.settle.count.Load() == 0 {
		return nil
	}
	s.settle.mu.Lock()
	defer s.settle.mu.Unlock()
	var owed map[string]owedDrop
	for k, p := range s.settle.pending {
		if p.synced && match(k) {
			if owed == nil {
				owed = map[string]owedDrop{}
			}
			owed[k] = owedDrop{seq: p.Seq, version: p.Version, recFP: p.recFP, fp: p.fp}
		}
	}
	return owed
}

// dropSettled deletes the records of owed publishes that are still theirs,
// and gives their files' entries the fingerprint the rename left, where
// they still hold the one recorded before it.
func dropSettled(tx *bolt.Tx, owed map[string]owedDrop) error {
	b := tx.Bucket(bucketUnsettled)
	for k, o := range owed {
		if cur, ok := getUnsettled(b, k); ok && cur.Seq == o.seq {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
		}
		if o.fp == o.recFP || o.fp == (fingerprint{}) {
			continue
		}
		r, found, err := getRecord(tx, k)
		if err != nil {
			return err
		}
		if found && r.Version == o.version && r.FP == o.recFP {
			r.FP = o.fp
			if err := putRecord(tx, k, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// forgetSettled forgets owed publishes once a commit deleted their records.
func (s *Store) forgetSettled(owed map[string]owedDrop) {
	s.settle.mu.Lock()
	defer s.settle.mu.Unlock()
	for k, o := range owed {
		if cur, ok := s.settle.pending[k]; ok && cur.Seq == o.seq && cur.synced {
			delete(s.settle.pending, k)
			s.settle.count.Add(-1)
		}
	}
}

// everything matches every key.
func everything(string) bool { return true }

// errKeyDirGone is syncKey's error for a key whose directory is gone or a
// link now.
var errKeyDirGone = errors.New("directory gone")

// syncKey fsyncs the regular file at key, if there is one, and its
// directory, unless synced has it already.
func (s *Store) syncKey(key string, synced map[string]bool) error {
	err := s.inKeyDir(key, false, func(d keyDir) error {
		f, err := d.open(d.name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		switch {
		case err == nil:
			fi, serr := f.Stat()
			if serr == nil && fi.Mode().IsRegular() {
				serr = f.Sync()
			}
			f.Close()
			if serr != nil {
				return serr
			}
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ELOOP):
			return err
		}
		dir := path.Dir(key)
		if synced[dir] {
			return nil
		}
		synced[dir] = true
		return d.sync()
	})
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		// The file's own absence is handled above: this is its directory's.
		return fmt.Errorf("sync %s: %w", key, errKeyDirGone)
	}
	return err
}

func getUnsettled(b *bolt.Bucket, key string) (unsettled, bool) {
	v := b.Get([]byte(key))
	if v == nil {
		return unsettled{}, false
	}
	u, err := decodeUnsettled(v)
	return u, err == nil
}

func putUnsettled(tx *bolt.Tx, key string, u unsettled) error {
	v, err := encodeUnsettled(u)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketUnsettled).Put([]byte(key), v)
}

// dropUnsettled forgets key's record when v, a version recorded after the
// publish, is another: the later change supersedes it. The same version
// seen again leaves the publish to settle.
func dropUnsettled(tx *bolt.Tx, key string, v Version) error {
	b := tx.Bucket(bucketUnsettled)
	if u, ok := getUnsettled(b, key); !ok && b.Get([]byte(key)) == nil || ok && u.Version == v {
		return nil
	}
	return b.Delete([]byte(key))
}

// moveSettling follows a directory's rename (swap: an exchange of a and b)
// with the publishes below it not yet settled, in memory: one that ran
// between the rename's settling and the rename itself is synced at its
// new path. moveUnsettled moves their records in the index.
func (s *Store) moveSettling(a, b string, swap bool) {
	if s.settle.count.Load() == 0 {
		return
	}
	s.settle.mu.Lock()
	defer s.settle.mu.Unlock()
	moveKeys(s.settle.pending, a, b, swap)
	s.settle.count.Store(int64(len(s.settle.pending)))
	select {
	case s.settle.kick <- struct{}{}:
	default:
	}
}

// moveUnsettled moves the records at and below from to to, in tx.
func moveUnsettled(tx *bolt.Tx, from, to string) error {
	b := tx.Bucket(bucketUnsettled)
	moved := map[string][]byte{}
	c := b.Cursor()
	for k, v := c.Seek([]byte(from)); k != nil && bytes.HasPrefix(k, []byte(from)); k, v = c.Next() {
		if under(string(k), from) {
			moved[to+string(k[len(from):])] = bytes.Clone(v)
		}
	}
	for k := range moved {
		if err := b.Delete([]byte(from + k[len(to):])); err != nil {
			return err
		}
	}
	for k, v := range moved {
		if err := b.Put([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}
