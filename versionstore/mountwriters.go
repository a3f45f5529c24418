package versionstore

import (
	"context"
	"time"
)

// Writers says which files a mount has open for writing: a file is being
// written from its first open for writing (or its creation) to its last
// writer's release, and while it is, a version may be owed (its bytes
// changed since its version was last committed). While a file is being
// written, the store refuses to let a tool replace it (the writer's later
// writes would land in the replaced inode, lost), trusts no fingerprint of
// it, and attributes a change to it to nobody but the writer's own commit.
// The mount owns the answer; a store with none attached has nothing being
// written.
type Writers interface {
	// Writing reports whether the file at key is being written.
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

// registry is the attached Writers, nil when none is.
func (m *Mount) registry() Writers {
	b, _ := m.writers.Load().(writersBox)
	return b.w
}

// writing reports whether key is being written through the mount.
func (m *Mount) writing(key string) bool {
	w := m.registry()
	return w != nil && w.Writing(key)
}

// writingFailure is the failure of op on display because the mount is
// writing key, naming the writer when the mount can.
func (m *Mount) writingFailure(op, display, key string) *Error {
	e := fail(ReasonMountWriting, op, display)
	if n, ok := m.registry().(WriterNamer); ok {
		e.By, _ = n.WrittenBy(key)
	}
	return e
}

// owed are the files being written through the mount with changes not
// committed yet.
func (m *Mount) owed() []string {
	if w := m.registry(); w != nil {
		return w.Owed()
	}
	return nil
}

// writingCount counts the files being written through the mount.
func (m *Mount) writingCount() int {
	if w := m.registry(); w != nil {
		return w.Count()
	}
	return 0
}

// writerGrace is how long a tool mutation waits for the mount's writers of
// its file to let go before it is refused: the kernel releases a closed
// file after close(2) has returned, so a shell command that just finished
// may still hold it for a moment.
const writerGrace = 250 * time.Millisecond

// awaitWriters waits, up to writerGrace and without the file's lock, for
// key to be no longer being written. The caller checks it again under the
// lock.
func (m *Mount) awaitWriters(ctx context.Context, key string) {
	m.awaitReleased(ctx, func(w Writers) <-chan struct{} { return w.Released(key) })
}

// awaitIdle waits, up to writerGrace, for the files being written through
// the mount to be let go: a command that just finished writing may still
// hold them for a moment (the kernel releases a closed file after close
// returns).
func (m *Mount) awaitIdle(ctx context.Context) {
	m.awaitReleased(ctx, Writers.Idle)
}

// awaitReleased waits, up to writerGrace, until released (of the attached
// Writers) is nil: each wait is for its channel to be closed, and a
// channel closed while another writer took over is followed by the next.
func (m *Mount) awaitReleased(ctx context.Context, released func(Writers) <-chan struct{}) {
	w := m.registry()
	if w == nil {
		return
	}
	ch := released(w)
	if ch == nil {
		return // nothing is being written: one question, no timer
	}
	grace := time.NewTimer(writerGrace)
	defer grace.Stop()
	for ; ch != nil; ch = released(w) {
		select {
		case <-ch:
		case <-grace.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
