package versionstore

import (
	"context"
	"strings"
	"sync"
	"time"
)

// The mount's side of the index. Writes through the mount are frequent and
// small (a `tar -x` commits a version per file), so their versions are
// committed to bbolt in batches. Every tool operation, history query and
// directory move applies the pending batch first, so they always see the
// mount's latest versions and attribute them to the mount. Which files the
// mount is writing now is the mount's to say (Writers): the store asks.

// mountState is the in-memory half of the index.
type mountState struct {
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

// Writers says which files a mount has open for writing. While one is, the
// store refuses to let a tool replace it (the writer's later writes would
// land in the replaced inode, lost), trusts no fingerprint of it, and
// attributes a change to it to nobody but the writer's own commit. The mount
// owns the answer; a store with none attached has nothing being written.
type Writers interface {
	Writing(key string) bool
	// Count is how many files are being written.
	Count() int
	// Owed are the paths of the files being written whose latest bytes are
	// not committed yet (with kernel passthrough, all of them: their
	// writes are not seen).
	Owed() []string
	// Released is closed once the file at key is no longer being written
	// there (its last writer let go, or it was renamed or unlinked); nil
	// when it is not being written now. A waiter is told, not polling.
	Released(key string) <-chan struct{}
	// Idle is closed once no file is being written; nil when none is now.
	Idle() <-chan struct{}
}

// WriterNamer is Writers that can also say who writes a file: the writer
// of the latest handle that opened it for writing, as the mount describes
// it. A tool refused over that file says so, rather than that the file
// changed, which would send the model to re-read it for nothing.
type WriterNamer interface {
	WrittenBy(key string) (Writer, bool)
}

// writersBox holds the attached Writers (an interface in an atomic.Value
// must always have the same concrete type).
type writersBox struct{ w Writers }

// AttachWriters makes w the store's source of the files being written
// (nil: none).
func (s *Store) AttachWriters(w Writers) { s.writers.Store(writersBox{w}) }

// dirty reports whether key is being written through the mount.
func (s *Store) dirty(key string) bool {
	b, _ := s.writers.Load().(writersBox)
	return b.w != nil && b.w.Writing(key)
}

// mountWriting is the failure of op on display because the mount is
// writing key, naming the writer when the mount can.
func (s *Store) mountWriting(op, display, key string) *Error {
	e := fail(ReasonMountWriting, op, display)
	b, _ := s.writers.Load().(writersBox)
	if n, ok := b.w.(WriterNamer); ok {
		e.By, _ = n.WrittenBy(key)
	}
	return e
}

// owed are the files being written through the mount with changes not
// committed yet.
func (s *Store) owed() []string {
	b, _ := s.writers.Load().(writersBox)
	if b.w == nil {
		return nil
	}
	return b.w.Owed()
}

// awaitMountWriters waits, up to writerGrace, for the files being written
// through the mount to be let go: a command that just finished writing
// may still hold them for a moment (the kernel releases a closed file after
// close returns).
func (s *Store) awaitMountWriters(ctx context.Context) {
	s.awaitReleased(ctx, Writers.Idle)
}

// awaitReleased waits, up to writerGrace, until released (of the attached
// Writers) is nil: each wait is for its channel to be closed, and a
// channel closed while another writer took over is followed by the next.
func (s *Store) awaitReleased(ctx context.Context, released func(Writers) <-chan struct{}) {
	b, _ := s.writers.Load().(writersBox)
	if b.w == nil {
		return
	}
	grace := time.NewTimer(writerGrace)
	defer grace.Stop()
	for {
		ch := released(b.w)
		if ch == nil {
			return
		}
		select {
		case <-ch:
		case <-grace.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// beingWritten counts the files being written through the mount.
func (s *Store) beingWritten() int {
	b, _ := s.writers.Load().(writersBox)
	if b.w == nil {
		return 0
	}
	return b.w.Count()
}

// queue adds a mount commit of key to the next batch.
func (s *Store) queue(key string, c change) { s.enqueue(key, c) }

// enqueue adds c to the next batch.
func (s *Store) enqueue(key string, c change) {
	s.mount.mu.Lock()
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
	if err := s.commit(keys, cs); err != nil {
		s.logErr("commit mount versions", batch[0].key, err)
		s.mount.mu.Lock()
		s.mount.failed++
		s.mount.failedErr = err
		s.mount.mu.Unlock()
	}
}

// batchFailures counts the batches whose commit failed so far, with the
// last failure.
func (s *Store) batchFailures() (uint64, error) {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	return s.mount.failed, s.mount.failedErr
}

// mountFlushInterval bounds how long a mount version waits in memory.
const mountFlushInterval = 50 * time.Millisecond

// moveMarks moves the in-memory marks (created, renamed) of a and
// everything below it to b, as a rename moved the files; with swap, b's go
// to a.
func (s *Store) moveMarks(a, b string, swap bool) {
	s.mount.mu.Lock()
	defer s.mount.mu.Unlock()
	moveKeys(s.mount.bornAbsent, a, b, swap)
	moveKeys(s.mount.renames, a, b, swap)
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
