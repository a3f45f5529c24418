package fusefs

import (
	"sync"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// dirtySet counts, per node, the handles open for writing (and those that
// changed the file through a truncating open or a SETATTR) until they are
// released. The store's dirty mark is set by the first and cleared by the
// last, so a tool mutation is refused while any of them is open: a tool's
// publish would leave their later writes in the replaced inode. owed says
// the file changed since its version was last committed. Counts change only
// under the file's versionstore lock.
type dirtySet struct {
	mu   sync.Mutex
	n    map[*node]int
	owed map[*node]bool
}

func (d *dirtySet) add(n *node) (first bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n, d.owed = make(map[*node]int), make(map[*node]bool)
	}
	d.n[n]++
	d.owed[n] = true
	return d.n[n] == 1
}

// owe notes a change to n, if n is in the set, and reports whether it is.
func (d *dirtySet) owe(n *node) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n[n] == 0 {
		return false
	}
	d.owed[n] = true
	return true
}

// paid notes that n's version was committed, and reports whether it was
// owed.
func (d *dirtySet) paid(n *node) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	owed := d.owed[n]
	delete(d.owed, n)
	return owed
}

func (d *dirtySet) done(n *node) (last bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n[n]--
	if d.n[n] > 0 {
		return false
	}
	delete(d.n, n)
	return true
}

func (d *dirtySet) has(n *node) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[n] > 0
}

// dirtyAdd is called under key's lock when a handle first changes n. The
// first keeps the file's bytes before they change.
func (f *FS) dirtyAdd(n *node, key string) {
	if f.dirty.add(n) {
		f.store.Preserve(key)
		f.logErr("mark dirty", key, f.store.MarkDirty(key))
	}
}

// dirtyDone is called when a handle in the dirty set is released; the last
// one records the version of the bytes on disk, written by w, if it changed
// since the last commit, and clears the mark.
func (f *FS) dirtyDone(n *node, w versionstore.Writer) {
	key, unlock, ok := n.lockKey()
	defer unlock()
	if !ok {
		f.dirty.done(n)
		f.dirty.paid(n)
		return
	}
	f.dirtyDoneLocked(n, key, w)
}

// dirtyDoneLocked is dirtyDone for a caller holding key's lock.
func (f *FS) dirtyDoneLocked(n *node, key string, w versionstore.Writer) {
	if !f.dirty.done(n) {
		return
	}
	if !f.dirty.paid(n) {
		f.store.Unmark(key) // committed at the last flush, unchanged since
		return
	}
	_, err := f.store.Refresh(key, w)
	f.logErr("commit version", key, err)
}

// dirtyCommit records the version of the bytes on disk, written by w, while
// handles stay open for writing (a flush or fsync): the store's mark is set
// again under the same lock, so no tool mutation slips in between.
func (f *FS) dirtyCommit(n *node, w versionstore.Writer) {
	key, unlock, ok := n.lockKey()
	defer unlock()
	if !ok {
		return
	}
	if !f.dirty.has(n) || !f.store.Marked(key) {
		// Released meanwhile (its commit was the last), or the file left
		// key (unlinked: nothing to commit; renamed: its mark went along,
		// and the last release commits it there).
		return
	}
	f.dirty.paid(n)
	_, err := f.store.Refresh(key, w)
	f.logErr("commit version", key, err)
	f.logErr("mark dirty", key, f.store.MarkDirty(key))
}

// refresh records the version of key after a change made in one operation
// (a truncate, a link, an unlink), unless open handles are still changing
// it: their last commit will. Callers hold key's lock.
func (f *FS) refresh(n *node, key string, w versionstore.Writer) {
	if n != nil && f.dirty.owe(n) {
		return
	}
	_, err := f.store.Refresh(key, f.actors.attribute(w))
	f.logErr("commit version", key, err)
}

func (f *FS) logErr(what, key string, err error) {
	if err != nil {
		f.log.Error(what, "path", key, "err", err)
	}
}

// Stale dirty marks. A dirty mark belongs to a path while a process writes
// the file there; the writer's commit clears it. A writer that closes in the
// instant a directory above its file is renamed commits under the old path
// (go-fuse names the file by it until the rename returns), and the mark
// moved to the new path is left behind, refusing tool writes there. So the
// mount checks, every staleMarkAge, the marks older than that: a mark no
// node being written maps to, twice in a row (a rename's window never lasts
// that long), is settled by committing what the file holds.
var staleMarkAge = 5 * time.Second

func (f *FS) settleStaleMarks(stop <-chan struct{}) {
	t := time.NewTicker(staleMarkAge)
	defer t.Stop()
	suspect := map[string]bool{}
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		orphans := map[string]bool{}
		for _, key := range f.store.DirtySince(time.Now().Add(-staleMarkAge)) {
			unlock := f.store.Locks().Lock(key)
			if !f.beingWritten(key) {
				if suspect[key] {
					f.log.Warn("settling a stale dirty mark", "path", key)
					_, err := f.store.Refresh(key, versionstore.Writer{Kind: versionstore.WriterMount})
					f.logErr("commit version", key, err)
				} else {
					orphans[key] = true
				}
			}
			unlock()
		}
		suspect = orphans
	}
}

// beingWritten reports whether a node with unflushed writes is at key.
func (f *FS) beingWritten(key string) bool {
	f.dirty.mu.Lock()
	nodes := make([]*node, 0, len(f.dirty.n))
	for n := range f.dirty.n {
		nodes = append(nodes, n)
	}
	f.dirty.mu.Unlock()
	for _, n := range nodes {
		if k, ok := n.key(); ok && k == key {
			return true
		}
	}
	return false
}
