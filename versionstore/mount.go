package versionstore

import (
	"strings"
	"sync"
	"time"
)

// The mount's side of the index. Writes through the mount are frequent and
// small (a `tar -x` commits a version per file), so their dirty marks live
// in memory — they mean nothing once the process is gone — and their
// versions are committed to bbolt in batches. Every tool operation, history
// query and directory move applies the pending batch first, so they always
// see the mount's latest versions and attribute them to the mount.

// mountState is the in-memory half of the index.
type mountState struct {
	mu           sync.Mutex
	dirty        map[string]time.Time // since when
	bornAbsent   map[string]bool      // keys the mount just created
	renames      map[string]rename    // keys a rename just moved a file to or from
	pending      []pendingChange
	pendingBytes int64 // of bytes to keep in pending

	// flushing is held while a batch is taken and committed, so a caller
	// that flushes waits for a batch another goroutine took a moment ago.
	flushing sync.Mutex
}

type pendingChange struct {
	key string
	c   change
}

// pendingLimit is how many queued versions trigger an immediate commit, and
// pendingBytesLimit how many bytes to keep.
const (
	pendingLimit      = 1024
	pendingBytesLimit = 64 << 20
)

// rename is one side of a file's rename, for the journal.
type rename struct{ from, to string }

// NoteRename tells the store that a file was renamed through the mount
// from oldKey to newKey: the next commits of the two paths are journaled as
// the halves of one rename. Callers hold both keys' locks.
func (s *Store) NoteRename(oldKey, newKey string) {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	if s.mount.renames == nil {
		s.mount.renames = make(map[string]rename)
	}
	s.mount.renames[newKey] = rename{from: oldKey}
	s.mount.renames[oldKey] = rename{to: newKey}
}

// takeRename returns and forgets key's side of a rename.
func (s *Store) takeRename(key string) (from, to string) {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	r := s.mount.renames[key]
	delete(s.mount.renames, key)
	return r.from, r.to
}

// MarkDirty records that key is being written through the mount: until the
// writes are committed by Refresh, no fingerprint is trusted for it, no
// change to it is attributed to anyone else, and tool mutations of it are
// refused. Callers hold the file's lock.
func (s *Store) MarkDirty(key string) error {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	if s.mount.dirty == nil {
		s.mount.dirty = make(map[string]time.Time)
	}
	if _, ok := s.mount.dirty[key]; !ok {
		s.mount.dirty[key] = s.now()
	}
	return nil
}

// dirty reports whether key has writes in progress through the mount.
func (s *Store) dirty(key string) bool {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	_, ok := s.mount.dirty[key]
	return ok
}

// DirtySince lists the keys marked dirty since before t: the mount checks
// that each still belongs to a file being written.
func (s *Store) DirtySince(t time.Time) []string {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	var keys []string
	for k, since := range s.mount.dirty {
		if since.Before(t) {
			keys = append(keys, k)
		}
	}
	return keys
}

// Marked reports whether key is marked as being written through the mount.
func (s *Store) Marked(key string) bool { return s.dirty(key) }

// Unmark drops key's dirty mark: the mount's writers of key are done, and
// its version was committed since their last change.
func (s *Store) Unmark(key string) { s.clearDirty(key) }

// clearDirty drops key's dirty mark without committing a version.
func (s *Store) clearDirty(key string) {
	s.mount.mu.Lock()
	delete(s.mount.dirty, key)
	s.mount.mu.Unlock()
}

// queue adds a mount commit of key to the next batch and clears its dirty
// mark.
func (s *Store) queue(key string, c change) { s.enqueue(key, c, true) }

// enqueue adds c to the next batch; clear drops key's dirty mark (a commit)
// or keeps it (bytes kept before a change).
func (s *Store) enqueue(key string, c change, clear bool) {
	s.mount.mu.Lock()
	if clear {
		delete(s.mount.dirty, key)
	}
	s.mount.pending = append(s.mount.pending, pendingChange{key, c})
	s.mount.pendingBytes += int64(len(c.data))
	full := len(s.mount.pending) >= pendingLimit || s.mount.pendingBytes >= pendingBytesLimit
	s.mount.mu.Unlock()
	if full {
		s.flushPending()
	}
}

// flushPending commits the queued mount versions, and the bytes they keep,
// in one transaction.
func (s *Store) flushPending() {
	s.mount.flushing.Lock()
	defer s.mount.flushing.Unlock()
	s.mount.mu.Lock()
	batch := s.mount.pending
	s.mount.pending, s.mount.pendingBytes = nil, 0
	s.mount.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	keys := make([]string, len(batch))
	cs := make([]change, len(batch))
	for i, p := range batch {
		keys[i], cs[i] = p.key, p.c
	}
	s.logErr("commit mount versions", batch[0].key, s.commit(keys, cs))
}

// mountFlushInterval bounds how long a mount version waits in memory.
const mountFlushInterval = 50 * time.Millisecond

// moveMarks moves the in-memory marks (dirty, created) of a and everything
// below it to b, as a rename moved the files; with swap, b's go to a.
func (s *Store) moveMarks(a, b string, swap bool) {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	moveKeys(s.mount.dirty, a, b, swap)
	moveKeys(s.mount.bornAbsent, a, b, swap)
}

func moveKeys[V any](m map[string]V, a, b string, swap bool) {
	moved := map[string]V{}
	for k, v := range m {
		switch {
		case under(k, a):
			moved[b+strings.TrimPrefix(k, a)] = v
			delete(m, k)
		case swap && under(k, b):
			moved[a+strings.TrimPrefix(k, b)] = v
			delete(m, k)
		}
	}
	for k, v := range moved {
		m[k] = v
	}
}

// under reports whether key is root or a path below it.
func under(key, root string) bool {
	return key == root || strings.HasPrefix(key, root+"/")
}
