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
	stored  atomic.Int64 // bytes the objects occupy
	trigger atomic.Int64 // a background collection starts above this

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

// objectsAdded counts new objects and starts a background collection when
// the store is over budget.
func (s *Store) objectsAdded(n int64) {
	if s.retain.stored.Add(n) <= s.retain.trigger.Load() || !s.retain.running.CompareAndSwap(false, true) {
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
	StoredBytes    int64 `json:"stored_bytes"`    // what the kept objects occupy
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
	var files []Version
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
		var total int64
		objs := tx.Bucket(bucketObjects)
		n := objs.Stats().KeyN
		i := 0
		err = objs.ForEach(func(k, val []byte) error {
			var v Version
			copy(v[:], k)
			size := packedSize(val)
			total += size
			if pinned[v] {
				res.Pinned++
			} else {
				cands = append(cands, candidate{v, storedAt(val), size, len(val) > 0 && val[0] == objFile})
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
				files = append(files, c.v)
			}
			total -= c.size
			res.Removed++
			res.FreedBytes += c.size
		}
		res.Objects = objs.Stats().KeyN - res.Removed
		res.StoredBytes = total
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
	if len(files) > 0 {
		if err := s.db.Sync(); err != nil {
			return res, err
		}
	}
	for _, v := range files {
		os.Remove(s.objects.path(v)) // still under the files lock
	}
	s.retain.stored.Store(res.StoredBytes)
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
