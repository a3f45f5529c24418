package versionstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A collection runs in short transactions. bbolt has one write
// transaction at a time, and every commit — a tool edit's, the mount's
// batches — waits for it: a collection that dropped 100,000 objects in one
// transaction held every commit for its whole length (BENCHMARKS.md,
// "collection"). So it reads what to drop in read-only transactions, which
// no commit waits for, and drops it collectBatch objects a transaction,
// through the group committer like any commit.
//
// What it read can be out of date by the time it drops an object: a commit
// may meanwhile have made the object's version current again (a file
// written back to old bytes: the commit finds them stored and does not
// store them again), or a checkpoint made since may need it. Either way the
// version was recorded as a file's current one after the collection began,
// so from before its first read until its last drop the collection watches
// for the versions recorded (revivals) and drops none of them.

// collectBatch is the most objects a collection drops in one transaction.
// A batch of 256 costs the commits that share or wait for its transaction
// about 5 ms; one of 1,024 about 15 ms (its pages: the entries' keys are
// hashes, spread over the whole bucket), with the collection itself twice
// as fast (BENCHMARKS.md, "collection").
const collectBatch = 256

// scanChunk is the most objects a read-only transaction of the collection
// reads: a long reader holds up a commit that must grow the index's file.
const scanChunk = 8192

// errClosing is a collection asked for while the store closes.
var errClosing = errors.New("collect kept bytes: the store is closing")

// revivals are the versions recorded as some file's current one while a
// collection watches.
type revivals struct {
	on atomic.Bool
	mu sync.Mutex
	vs map[Version]bool
}

func (r *revivals) start() {
	r.mu.Lock()
	r.vs = map[Version]bool{}
	r.mu.Unlock()
	r.on.Store(true)
}

func (r *revivals) stop() {
	r.on.Store(false)
	r.mu.Lock()
	r.vs = nil
	r.mu.Unlock()
}

// note is told every version a transaction records as current. A
// transaction rolled back may have noted one: that object is merely kept.
func (r *revivals) note(v Version) {
	if v.IsZero() || !r.on.Load() {
		return
	}
	r.mu.Lock()
	if r.vs != nil {
		r.vs[v] = true
	}
	r.mu.Unlock()
}

func (r *revivals) has(v Version) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.vs[v]
}

// candidate is an object a collection may drop.
type candidate struct {
	v      Version
	at     time.Time
	size   int64
	inFile bool
}

// GCResult says what a collection did.
type GCResult struct {
	Objects        int   `json:"objects"`         // objects kept
	Pinned         int   `json:"pinned"`          // of them, current or needed by a checkpoint
	Removed        int   `json:"removed"`         // objects dropped
	FreedBytes     int64 `json:"freed_bytes"`     // their size
	StoredBytes    int64 `json:"stored_bytes"`    // what the kept objects and the index occupy
	BudgetBytes    int64 `json:"budget_bytes"`    // the budget
	JournalTrimmed int   `json:"journal_trimmed"` // journal entries no checkpoint needs, dropped
}

// GC drops kept bytes nobody needs: first those older than the retention
// age, then the oldest until the store is within its budget. It never drops
// the current version of a file, nor the version any checkpoint recorded
// for a file. progress, if set, is told how far it has got. A store
// closing stops it between two of its transactions.
func (s *Store) GC(progress func(done, total int)) (GCResult, error) {
	s.retain.mu.Lock()
	defer s.retain.mu.Unlock()
	if s.retain.stopping.Load() {
		return GCResult{}, errClosing
	}
	s.flushPending()
	s.retain.revived.start()
	defer s.retain.revived.stop()
	// A transaction that recorded a version before the watch began
	// commits before the first read (bbolt runs one writer at a time).
	if err := s.db.Update(func(*bolt.Tx) error { return nil }); err != nil {
		return GCResult{}, err
	}
	res := GCResult{BudgetBytes: s.retain.budget}
	drop, files, err := s.collectPlan(&res, progress)
	if err != nil {
		return GCResult{}, err
	}
	for len(drop) > 0 && !s.retain.stopping.Load() {
		n := min(len(drop), max(s.retain.batch, 1))
		if err := s.dropObjects(drop[:n], &res, &files); err != nil {
			return res, err
		}
		drop = drop[n:]
	}
	if res.JournalTrimmed, err = s.trimJournal(); err != nil {
		return res, err
	}
	// What the index takes now: the pages of the dropped entries are free.
	s.retain.files.Store(files)
	if err := s.measureIndex(); err != nil {
		return res, err
	}
	res.StoredBytes = s.retain.kept()
	// When what must be kept alone is over budget, the next collection
	// waits for a tenth of the budget more, not for the next commit.
	s.retain.trigger.Store(max(s.retain.budget, res.StoredBytes+s.retain.budget/10))
	return res, nil
}

// collectPlan reads, in read-only transactions, which objects to drop:
// those past the retention age, then the oldest while the store is over
// budget, never a pinned one. files is the bytes of the objects kept in
// files, as read.
func (s *Store) collectPlan(res *GCResult, progress func(done, total int)) (drop []candidate, files int64, err error) {
	var pinned map[Version]bool
	var total int64
	var n int
	err = s.db.View(func(tx *bolt.Tx) error {
		pinned, err = pinnedVersions(tx)
		total, n = s.pagesInUse(tx), tx.Bucket(bucketObjects).Stats().KeyN
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	var cands []candidate
	seen := 0
	for after := []byte(nil); ; {
		var last []byte
		err = s.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketObjects).Cursor()
			k, val := c.First()
			if after != nil {
				if k, val = c.Seek(after); k != nil && bytes.Equal(k, after) {
					k, val = c.Next()
				}
			}
			for i := 0; k != nil && i < scanChunk; k, val = c.Next() {
				var v Version
				copy(v[:], k)
				size, inFile := packedSize(val), len(val) > 0 && val[0] == objFile
				if inFile {
					files += size
					total += size
				}
				if pinned[v] {
					res.Pinned++
				} else {
					cands = append(cands, candidate{v, storedAt(val), size, inFile})
				}
				last = bytes.Clone(k)
				i++
				if seen++; progress != nil && seen%1024 == 0 {
					progress(seen, max(n, seen))
				}
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
		if last == nil {
			break
		}
		after = last
	}
	if progress != nil {
		progress(seen, seen)
	}
	res.Objects = seen
	sort.Slice(cands, func(i, j int) bool { return cands[i].at.Before(cands[j].at) })
	cutoff := s.now().Add(-s.retain.age)
	for i, c := range cands {
		if !c.at.Before(cutoff) && total <= s.retain.budget {
			return cands[:i], files, nil
		}
		total -= c.size
	}
	return cands, files, nil
}

// dropObjects drops batch in one transaction, but for the objects a commit
// has made current again since they were read, then removes the files of
// those kept in files. It holds the files lock (objectStore.files) from the
// transaction until the files are gone.
func (s *Store) dropObjects(batch []candidate, res *GCResult, files *int64) error {
	s.objects.files.Lock()
	defer s.objects.files.Unlock()
	var gone []candidate
	err := s.commits.update(func(tx *bolt.Tx) error {
		gone = gone[:0]
		objs := tx.Bucket(bucketObjects)
		for _, c := range batch {
			val := objs.Get(c.v[:])
			if val == nil || s.retain.revived.has(c.v) {
				continue
			}
			// A commit may have replaced the entry since (putObject).
			c.size, c.inFile = packedSize(val), val[0] == objFile
			if err := objs.Delete(c.v[:]); err != nil {
				return err
			}
			if err := noteUnkept(tx, c.v, unkeptCollected); err != nil {
				return err
			}
			gone = append(gone, c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The entries must be gone for good before their files are: a crash
	// must not bring back an entry naming a removed file.
	synced := false
	for _, c := range gone {
		res.Removed++
		res.Objects--
		res.FreedBytes += c.size
		if !c.inFile {
			continue
		}
		if !synced {
			if err := s.db.Sync(); err != nil {
				return err
			}
			synced = true
		}
		*files -= c.size
		os.Remove(s.objects.path(c.v)) // still under the files lock
	}
	return nil
}

// trimJournal drops the entries before the oldest checkpoint, collectBatch
// a transaction: a rewind only reads entries after its checkpoint, and a
// checkpoint made later starts later still.
func (s *Store) trimJournal() (int, error) {
	total := 0
	for !s.retain.stopping.Load() {
		n := 0
		err := s.commits.update(func(tx *bolt.Tx) (err error) {
			n, err = trimJournalBatch(tx, max(s.retain.batch, 1))
			return err
		})
		if err != nil {
			return total, err
		}
		if total += n; n < s.retain.batch {
			break
		}
	}
	return total, nil
}

// trimJournalBatch drops up to limit of the entries no checkpoint needs.
func trimJournalBatch(tx *bolt.Tx, limit int) (int, error) {
	cps, err := checkpoints(tx)
	if err != nil {
		return 0, err
	}
	upTo := journalSeq(tx)
	for _, cp := range cps {
		upTo = min(upTo, cp.Seq)
	}
	b := tx.Bucket(bucketJournal)
	var drop [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && len(drop) < limit && binary.BigEndian.Uint64(k) <= upTo; k, _ = c.Next() {
		drop = append(drop, bytes.Clone(k))
	}
	for _, k := range drop {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(drop), nil
}
