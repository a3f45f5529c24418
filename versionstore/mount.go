package versionstore

import (
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The mount's side of the index. Writes through the mount are frequent and
// small (a `tar -x` commits a version per file), so their dirty marks live
// in memory — they mean nothing once the process is gone — and their
// versions are committed to bbolt in batches. Every tool operation, history
// query and directory move applies the pending batch first, so they always
// see the mount's latest versions and attribute them to the mount.

// mountState is the in-memory half of the index.
type mountState struct {
	mu      sync.Mutex
	dirty   map[string]bool
	pending []pendingChange

	// flushing is held while a batch is taken and committed, so a caller
	// that flushes waits for a batch another goroutine took a moment ago.
	flushing sync.Mutex
}

type pendingChange struct {
	key string
	c   change
}

// pendingLimit is how many queued versions trigger an immediate commit.
const pendingLimit = 1024

// MarkDirty records that key is being written through the mount: until the
// writes are committed by Refresh, no fingerprint is trusted for it, no
// change to it is attributed to anyone else, and tool mutations of it are
// refused. Callers hold the file's lock.
func (s *Store) MarkDirty(key string) error {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	if s.mount.dirty == nil {
		s.mount.dirty = make(map[string]bool)
	}
	s.mount.dirty[key] = true
	return nil
}

// dirty reports whether key has writes in progress through the mount.
func (s *Store) dirty(key string) bool {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	return s.mount.dirty[key]
}

// clearDirty drops key's dirty mark without committing a version.
func (s *Store) clearDirty(key string) {
	s.mount.mu.Lock()
	delete(s.mount.dirty, key)
	s.mount.mu.Unlock()
}

// queue adds a mount commit of key to the next batch and clears its dirty
// mark.
func (s *Store) queue(key string, c change) {
	s.mount.mu.Lock()
	delete(s.mount.dirty, key)
	s.mount.pending = append(s.mount.pending, pendingChange{key, c})
	full := len(s.mount.pending) >= pendingLimit
	s.mount.mu.Unlock()
	if full {
		s.flushPending()
	}
}

// flushPending commits the queued mount versions in one transaction.
func (s *Store) flushPending() {
	s.mount.flushing.Lock()
	defer s.mount.flushing.Unlock()
	s.mount.mu.Lock()
	batch := s.mount.pending
	s.mount.pending = nil
	s.mount.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	s.logErr("commit mount versions", batch[0].key, s.db.Update(func(tx *bolt.Tx) error {
		for _, p := range batch {
			if err := s.record(tx, p.key, p.c); err != nil {
				return err
			}
		}
		return nil
	}))
}

// mountFlushInterval bounds how long a mount version waits in memory.
const mountFlushInterval = 50 * time.Millisecond
