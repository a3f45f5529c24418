package versionstore

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The mount's side of the store. Writes through the mount are frequent and
// small (a `tar -x` commits a version per file), so their versions are
// committed to bbolt in batches. Every tool operation, history query and
// directory move applies the pending batch first, so they always see the
// mount's latest versions and attribute them to the mount. Which files the
// mount is writing now is the mount's to say (Writers): the store asks.

// Mount is the mount's side of the store, returned when a mount attaches
// (Store.AttachMount): the operations only the mount calls (mountops.go),
// the batch of its versions not yet committed, the marks of the files it
// just created or renamed, and the registry of the files it is writing
// (mountwriters.go). The tools and the CLI use the Store; the mount the
// Store for what they share and its Mount for the rest. Its locks' place in
// the order is in lockorder.go.
type Mount struct {
	s       *Store
	writers atomic.Value // writersBox: the registry the mount attached

	mu           sync.Mutex
	bornAbsent   map[string]bool   // keys the mount just created
	renames      map[string]rename // keys a rename just moved a file to or from
	pending      []pendingChange
	pendingBytes int64 // of bytes to keep in pending
	// failed counts the batches whose commit failed, failedErr the last
	// failure: a walk that queued its findings learns they were lost.
	failed    uint64
	failedErr error

	// flushing is held while a batch is taken and committed, so a caller
	// that flushes waits for a batch another goroutine took a moment ago.
	flushing sync.Mutex
	// queued is, for each key in pending, what its last queued change
	// found (queuedAs).
	queued map[string]queuedFile
	// stated is, for a key whose record a batch committed within the racy
	// window from a stat taken before its read, that stat (statedFirst).
	stated map[string]queuedFile
	// full asks the flush loop for a commit now: the batch reached its
	// limit.
	full chan struct{}
}

// AttachMount makes w the store's registry of the files being written
// (nil: none) and returns the mount's side of the store.
func (s *Store) AttachMount(w Writers) *Mount {
	s.mount.writers.Store(writersBox{w})
	return &s.mount
}

// Locks is the per-file lock table the mount shares with the tools.
func (m *Mount) Locks() *Locks { return &m.s.locks }

type pendingChange struct {
	key string
	c   change
}

// A batch is full at batchFull versions or batchFullBytes bytes to keep:
// the flush loop commits it while the mount goes on. One that reaches the
// stall limits (the disk is slower than the writers) is committed by the
// writer that queued last, which waits for the disk: that bounds the
// memory the batch holds.
const (
	batchFull       = 1024
	batchFullBytes  = 16 << 20
	batchStall      = 4 * batchFull
	batchStallBytes = 64 << 20
)

// rename is one side of a file's rename, for the journal.
type rename struct{ from, to string }

// takeRename returns and forgets key's side of a rename.
func (m *Mount) takeRename(key string) (from, to string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.renames[key]
	delete(m.renames, key)
	return r.from, r.to
}

// born reports whether key was just created by the mount (Created).
func (m *Mount) born(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bornAbsent[key]
}

// takeBornAbsent reports and forgets whether key was noted absent.
func (m *Mount) takeBornAbsent(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	born := m.bornAbsent[key]
	delete(m.bornAbsent, key)
	return born
}

// enqueue adds c, a commit of key, to the next batch.
func (m *Mount) enqueue(key string, c change) {
	m.s.packAhead(&c)
	m.mu.Lock()
	m.pending = append(m.pending, pendingChange{key, c})
	m.pendingBytes += c.keptBytes()
	if m.queued == nil {
		m.queued = make(map[string]queuedFile)
	}
	m.queued[key] = queuedFile{fp: c.fp, at: c.at, version: c.version, kept: c.carries(), statFirst: c.statFirst}
	n, bytes := len(m.pending), m.pendingBytes
	m.mu.Unlock()
	switch {
	case n >= batchStall || bytes >= batchStallBytes:
		m.flush()
	case n >= batchFull || bytes >= batchFullBytes:
		select {
		case m.full <- struct{}{}:
		default: // already asked
		}
	}
}

// queuedBytes is how many bytes the next batch keeps.
func (m *Mount) queuedBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pendingBytes
}

// flushPending commits the mount's queued versions: every tool operation,
// history query and walk applies them first.
func (s *Store) flushPending() { s.mount.flush() }

// flush commits the queued versions, and the bytes they keep, in one
// transaction.
func (m *Mount) flush() {
	released := Ranked(RankBatch, "")
	m.flushing.Lock()
	defer released()
	defer m.flushing.Unlock()
	m.mu.Lock()
	batch := m.pending
	m.pending, m.pendingBytes, m.queued = nil, 0, nil
	m.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	keys := make([]string, len(batch))
	cs := make([]change, len(batch))
	for i, p := range batch {
		keys[i], cs[i] = p.key, p.c
	}
	err := m.s.commit(keys, cs)
	m.noteStatedFirst(batch, err)
	if err != nil {
		m.s.logErr("commit mount versions", batch[0].key, err)
		m.mu.Lock()
		m.failed++
		m.failedErr = err
		m.mu.Unlock()
	}
}

// batchFailures counts the batches whose commit failed so far, with the
// last failure.
func (m *Mount) batchFailures() (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed, m.failedErr
}

// DefaultMountBatchInterval bounds how long a mount version waits in
// memory: the bound bbolt's own background sync had before every commit
// was durable, so a power cut takes no more of the mount's unasked-for
// versions than it did then.
const DefaultMountBatchInterval = time.Second

// moveMarks moves the in-memory marks (created, renamed) of a and
// everything below it to b, as a rename moved the files; with swap, b's go
// to a.
func (m *Mount) moveMarks(a, b string, swap bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	moveKeys(m.bornAbsent, a, b, swap)
	moveKeys(m.renames, a, b, swap)
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

// queuedFile is what a queued change of a file found: its fingerprint, when,
// its version, and whether the change carries its bytes.
type queuedFile struct {
	fp        fingerprint
	at        time.Time
	version   Version
	kept      bool
	statFirst bool
}

// noteStatedFirst remembers, for the racy window, the records the batch
// committed from a stat taken before their read (statedFirst), and forgets
// those older than the window.
func (m *Mount) noteStatedFirst(batch []pendingChange, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	horizon := m.s.now().Add(-racyWindow)
	for k, st := range m.stated {
		if st.at.Before(horizon) {
			delete(m.stated, k)
		}
	}
	if err != nil {
		return
	}
	for _, p := range batch {
		if p.c.keepOnly || !p.c.statFirst {
			delete(m.stated, p.key) // a later record of key, or none
			continue
		}
		if m.stated == nil {
			m.stated = make(map[string]queuedFile)
		}
		m.stated[p.key] = queuedFile{fp: p.c.fp, at: p.c.at}
	}
}

// statedFirst reports whether r is the record a batch committed from a
// stat taken before its read: not one the store wrote since (a publish, a
// restore), whose fingerprint was taken after its write.
func (m *Mount) statedFirst(key string, r record) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.stated[key]
	return ok && st.fp == r.FP && st.at.UnixNano() == r.Recorded
}

// queuedAs is the last change of key waiting in the batch, if any: the
// index does not have it yet.
func (m *Mount) queuedAs(key string) (queuedFile, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q, ok := m.queued[key]
	return q, ok
}
