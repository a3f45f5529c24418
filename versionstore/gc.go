package versionstore

import (
	"fmt"
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
	batch   int // objects a collection drops in one transaction (collectBatch)

	// A collection starts in the background only while the store is open:
	// closed, under bgMu, tells a late commit not to start one once Close
	// has begun waiting for them, and stopping ends a running one at its
	// next batch.
	bgMu     sync.Mutex
	closed   bool
	stopping atomic.Bool
	bg       sync.WaitGroup

	revived revivals // versions made current while a collection runs
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
	r.batch = collectBatch
}

// wait returns once the background collections running are over; a
// commit may start another afterwards (tests wait so between steps).
func (r *retention) wait() { r.bg.Wait() }

// close stops the background collections, a running one at its next
// batch, and returns once they are over; none starts afterwards, whatever
// commits meanwhile.
func (r *retention) close() {
	r.stopping.Store(true)
	r.bgMu.Lock()
	r.closed = true
	r.bgMu.Unlock()
	r.bg.Wait()
}

// startBackground counts a background collection about to start, unless
// the store is closing.
func (r *retention) startBackground() bool {
	r.bgMu.Lock()
	defer r.bgMu.Unlock()
	if r.closed {
		return false
	}
	r.bg.Add(1)
	return true
}

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
	if !s.retain.startBackground() {
		s.retain.running.Store(false)
		return
	}
	go func() {
		defer s.retain.bg.Done()
		defer s.retain.running.Store(false)
		if _, err := s.GC(nil); err != nil {
			s.log.Error("collect kept bytes", "err", err)
		}
	}()
}

// pinnedVersions are the versions collection keeps: every file's current
// version, and every version a checkpoint recorded — for each path changed
// since a checkpoint, the version its first later change replaced.
func pinnedVersions(tx *bolt.Tx) (map[Version]bool, error) {
	pinned := map[Version]bool{}
	err := tx.Bucket(bucketFiles).ForEach(func(k, v []byte) error {
		r, err := decodeRecord(v)
		if err != nil {
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
