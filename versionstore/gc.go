package versionstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Retention defaults.
const (
	DefaultRetainBytes = 2 << 30
	DefaultRetainAge   = 30 * 24 * time.Hour
)

// retention tracks the object store's size and runs collections: on
// demand, and in the background when a commit takes the store over budget.
type retention struct {
	budget  int64
	age     time.Duration
	files   atomic.Int64 // bytes of the objects kept in files of their own
	index   atomic.Int64 // bytes of the index's pages, the objects in it included
	trigger atomic.Int64 // a background collection starts above this
	// pageSize is the index's page size, read once: bbolt's Info races
	// with a write that grows the file.
	pageSize int64

	mu      sync.Mutex // one collection at a time
	running atomic.Bool
	bg      sync.WaitGroup
}

// init sets the budget and age, defaults for zero.
func (r *retention) init(budget int64, age time.Duration) {
	if budget <= 0 {
		budget = DefaultRetainBytes
	}
	if age == 0 {
		age = DefaultRetainAge
	}
	r.budget, r.age = budget, age
	r.trigger.Store(budget)
}

// wait returns once the background collections are over. No commit may
// run meanwhile: one could start a collection as the wait begins (Close
// waits once the sync loop is stopped and the last batch committed).
func (r *retention) wait() { r.bg.Wait() }

// kept is what the budget counts: the index, with the small objects kept
// in it, and the objects kept in files. The index's own share is not
// small: history and journal entries of many small versions take far more
// than the versions' bytes (149,000 versions of a few bytes: 8.4 MiB of
// objects, a 260 MB index).
func (r *retention) kept() int64 { return r.files.Load() + r.index.Load() }

// measureIndex notes the space the index's pages take; on an error the
// last measure stands.
func (s *Store) measureIndex() error {
	err := s.db.View(func(tx *bolt.Tx) error {
		s.retain.index.Store(s.pagesInUse(tx))
		return nil
	})
	if err != nil {
		return fmt.Errorf("measure index: %w", err)
	}
	return nil
}

// pagesInUse is the index's size as tx sees it less its free pages, which a
// collection makes and later commits reuse. (The free pages are counted
// from the freelist, as bbolt's FreeAlloc is only set by a write.)
func (s *Store) pagesInUse(tx *bolt.Tx) int64 {
	st := s.db.Stats()
	return tx.Size() - int64(st.FreePageN+st.PendingPageN)*s.retain.pageSize
}

// objectsAdded counts a commit's new objects kept in files and the index's
// new size, and starts a background collection when the store is over
// budget.
func (s *Store) objectsAdded(inFiles int64) {
	s.retain.files.Add(inFiles)
	if err := s.measureIndex(); err != nil {
		s.log.Error("measure the index", "err", err)
	}
	if s.retain.kept() <= s.retain.trigger.Load() || !s.retain.running.CompareAndSwap(false, true) {
		return
	}
	s.retain.bg.Add(1)
	go func() {
		defer s.retain.bg.Done()
		defer s.retain.running.Store(false)
		if _, err := s.GC(nil); err != nil {
			s.log.Error("collect kept bytes", "err", err)
		}
	}()
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
// for a file. progress, if set, is told how far it has got.
func (s *Store) GC(progress func(done, total int)) (GCResult, error) {
	s.retain.mu.Lock()
	defer s.retain.mu.Unlock()
	s.flushPending()
	res := GCResult{BudgetBytes: s.retain.budget}
	s.objects.files.Lock()
	defer s.objects.files.Unlock()
	var drop []Version // objects in files of their own
	var files int64
	err := s.db.Update(func(tx *bolt.Tx) error {
		pinned, err := pinnedVersions(tx)
		if err != nil {
			return err
		}
		type candidate struct {
			v      Version
			at     time.Time
			size   int64
			inFile bool
		}
		var cands []candidate
		total := s.pagesInUse(tx)
		objs := tx.Bucket(bucketObjects)
		n := objs.Stats().KeyN
		i := 0
		err = objs.ForEach(func(k, val []byte) error {
			var v Version
			copy(v[:], k)
			size := packedSize(val)
			inFile := len(val) > 0 && val[0] == objFile
			if inFile {
				files += size
				total += size
			}
			if pinned[v] {
				res.Pinned++
			} else {
				cands = append(cands, candidate{v, storedAt(val), size, inFile})
			}
			if i++; progress != nil && i%1024 == 0 {
				progress(i, n)
			}
			return nil
		})
		if err != nil {
			return err
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].at.Before(cands[j].at) })
		cutoff := s.now().Add(-s.retain.age)
		for _, c := range cands {
			if !c.at.Before(cutoff) && total <= s.retain.budget {
				break
			}
			if err := objs.Delete(c.v[:]); err != nil {
				return err
			}
			if err := noteUnkept(tx, c.v, unkeptCollected); err != nil {
				return err
			}
			if c.inFile {
				drop = append(drop, c.v)
				files -= c.size
			}
			total -= c.size
			res.Removed++
			res.FreedBytes += c.size
		}
		res.Objects = objs.Stats().KeyN - res.Removed
		if progress != nil {
			progress(n, n)
		}
		res.JournalTrimmed, err = trimJournal(tx)
		return err
	})
	if err != nil {
		return GCResult{}, err
	}
	// The entries must be gone for good before their files are: a crash
	// must not bring back an entry naming a removed file.
	if len(drop) > 0 {
		if err := s.db.Sync(); err != nil {
			return res, err
		}
	}
	for _, v := range drop {
		os.Remove(s.objects.path(v)) // still under the files lock
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

// pinnedVersions are the versions collection keeps: every file's current
// version, and every version a checkpoint recorded — for each path changed
// since a checkpoint, the version its first later change replaced.
func pinnedVersions(tx *bolt.Tx) (map[Version]bool, error) {
	pinned := map[Version]bool{}
	err := tx.Bucket(bucketFiles).ForEach(func(k, v []byte) error {
		var r record
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode index entry %q: %w", k, err)
		}
		if !r.Version.IsZero() {
			pinned[r.Version] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cps, err := checkpoints(tx)
	if err != nil {
		return nil, err
	}
	for _, cp := range cps {
		first, err := firstChangesAfter(tx, cp.Seq)
		if err != nil {
			return nil, err
		}
		for _, e := range first {
			if !e.PrevUnknown && !e.Prev.IsZero() {
				pinned[e.Prev] = true
			}
		}
	}
	return pinned, nil
}

// trimJournal drops the entries before the oldest checkpoint: a rewind only
// reads entries after its checkpoint, and a checkpoint made later starts
// later still.
func trimJournal(tx *bolt.Tx) (int, error) {
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
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= upTo; k, _ = c.Next() {
		drop = append(drop, bytes.Clone(k))
	}
	for _, k := range drop {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(drop), nil
}
