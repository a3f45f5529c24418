package fusefs

import (
	"maps"
	"strings"
	"sync"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/hanwen/go-fuse/v2/fs"
)

// writers owns "someone is writing this file" for the mount: for each file
// (node) open for writing, how many handles hold it so, whether a version
// is owed, and the path it is at now. A file is being written from its
// first open for writing (or its creation) to its last writer's release:
// meanwhile no tool may replace it (a publish would leave the writer's
// later writes in the replaced inode, lost) and its changes are the
// writer's to commit. The store asks this type (versionstore.Writers).
//
// The path moves with the file under the locks a rename holds, so it is
// always where the file is, before and after go-fuse moves its node; a file
// unlinked or replaced while open has no path any more, and its writes are
// nobody's version. moves orders a directory's rename (exclusive) against
// opens for writing and creates below it (shared), taken before any file's
// lock (the order of all the locks is in versionstore's lockorder.go): an
// open must not count its file at a path a rename is moving. It is never
// held across a system call that can wait on another process
// (identity.go): a rename waiting for it holds up every later holder.
type writers struct {
	locks *versionstore.Locks
	moves sync.RWMutex

	mu    sync.Mutex
	files map[*node]*writing
	paths map[string]*writing
	// renamed is where renames put nodes whose move go-fuse has not made in
	// its tree yet (it does after Rename returns): an open in that moment
	// must find the file at its new path, as the backing tree has it.
	renamed map[*fs.Inode]place
	// idle is closed when the last file stops being written (nil: none
	// handed out since).
	idle chan struct{}
}

// place is a name in a directory of the tree.
type place struct {
	parent *fs.Inode
	name   string
}

// writing is one file being written.
type writing struct {
	key     string // "" once the file has no path (unlinked, replaced)
	handles int
	by      versionstore.Writer // who opened the latest handle
	owed    bool                // changed since its version was last committed
	// mapped, in passthrough mode, is >= 0 while the file is open for
	// writing after its last writer's release — by a shared writable
	// mapping that outlived its close: a read-only descriptor of the file
	// to watch it through (mapped.go). The mapping counts as a handle.
	mapped   int
	mappedBy versionstore.Writer // who wrote it last through a handle
	// left is closed when the file stops being written at key: its last
	// writer let go, or a rename or an unlink took it from there.
	left chan struct{}
}

// leave closes w.left for the waiters on its key, and makes the channel of
// the key it is at next.
func (w *writing) leave() {
	close(w.left)
	w.left = make(chan struct{})
}

var (
	_ versionstore.Writers     = (*writers)(nil)
	_ versionstore.WriterNamer = (*writers)(nil)
)

func newWriters(locks *versionstore.Locks) *writers {
	return &writers{locks: locks, files: map[*node]*writing{}, paths: map[string]*writing{}, renamed: map[*fs.Inode]place{}}
}

// Writing reports whether the file at key is being written.
func (ws *writers) Writing(key string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.paths[key] != nil
}

// WrittenBy is who opened the latest handle writing the file at key.
func (ws *writers) WrittenBy(key string) (versionstore.Writer, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.paths[key]; w != nil {
		return w.by, true
	}
	return versionstore.Writer{}, false
}

// Owed are the paths of the files being written that owe a version.
func (ws *writers) Owed() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []string
	for key, w := range ws.paths {
		if w.owed {
			out = append(out, key)
		}
	}
	return out
}

// Count is how many files are being written.
func (ws *writers) Count() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.files)
}

// holdMoves takes moves, exclusively for a rename that moves or replaces
// a directory, else shared, and returns its release. Its place in the lock
// order is in versionstore's lockorder.go.
func (ws *writers) holdMoves(exclusive bool) (release func()) {
	released := versionstore.Ranked(versionstore.RankMoves, "")
	if exclusive {
		ws.moves.Lock()
		return func() { ws.moves.Unlock(); released() }
	}
	ws.moves.RLock()
	return func() { ws.moves.RUnlock(); released() }
}

// Released is closed once the file at key is no longer being written
// there; nil when it is not now.
func (ws *writers) Released(key string) <-chan struct{} {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.paths[key]; w != nil {
		return w.left
	}
	return nil
}

// Idle is closed once no file is being written; nil when none is now.
func (ws *writers) Idle() <-chan struct{} {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.files) == 0 {
		return nil
	}
	if ws.idle == nil {
		ws.idle = make(chan struct{})
	}
	return ws.idle
}

// begin counts one more handle writing n, at key, opened by by: the first
// makes the file being written. owed says the handle may change the file
// unseen (kernel passthrough) or already did (a create, a truncating open).
// Callers hold key's lock (and, for an open or a create, moves shared).
func (ws *writers) begin(n *node, key string, owed bool, by versionstore.Writer) (first bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.files[n]
	if w == nil {
		w = &writing{key: key, mapped: -1, left: make(chan struct{})}
		ws.files[n] = w
		ws.paths[key] = w
	}
	w.handles++
	w.owed = w.owed || owed
	w.by = by
	return w.handles == 1
}

// owe notes a change to n, if n is being written, and reports whether it is.
func (ws *writers) owe(n *node) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.files[n]; w != nil {
		w.owed = true
		return true
	}
	return false
}

// paid takes n's owed version for a commit now (a flush, an fsync): it
// reports whether one was owed, and where. With keep the version stays
// owed (in passthrough mode more may be written unseen).
func (ws *writers) paid(n *node, keep bool) (key string, owed bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.files[n]
	if w == nil || !w.owed || w.key == "" {
		return "", false
	}
	w.owed = keep
	return w.key, true
}

// last reports whether n is being written through one handle only.
func (ws *writers) last(n *node) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.files[n]
	return w != nil && w.handles == 1
}

// linger keeps n being written past its last handle's release, for a
// writable mapping watched through ro; it reports where n is ("": nowhere).
func (ws *writers) linger(n *node, ro int, by versionstore.Writer) string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.files[n]
	if w == nil {
		return ""
	}
	w.mapped, w.mappedBy = ro, by
	return w.key
}

// mapping is the descriptor n's lingering mapping is watched through (-1:
// none) and how many handles, the mapping's included, write n. The
// descriptor is the caller's to close once it has taken it (take).
func (ws *writers) mapping(n *node, take bool) (ro, handles int) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.files[n]
	if w == nil {
		return -1, 0
	}
	ro = w.mapped
	if take {
		w.mapped = -1
	}
	return ro, w.handles
}

// lingering are the files being written by a mapping only, and who wrote
// each last.
func (ws *writers) lingering() map[*node]versionstore.Writer {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := map[*node]versionstore.Writer{}
	for n, w := range ws.files {
		if w.mapped >= 0 {
			out[n] = w.mappedBy
		}
	}
	return out
}

// end counts one handle fewer. The last one ends the file's being written
// and reports whether a version is owed, and where (key "": nowhere, the
// file left the tree). Callers hold the key's lock (lock).
func (ws *writers) end(n *node) (key string, owed, last bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.files[n]
	if w == nil {
		return "", false, false
	}
	if w.handles--; w.handles > 0 {
		return w.key, false, false
	}
	delete(ws.files, n)
	if w.key != "" {
		delete(ws.paths, w.key)
	}
	w.leave()
	if len(ws.files) == 0 && ws.idle != nil {
		close(ws.idle)
		ws.idle = nil
	}
	return w.key, w.owed, true
}

// ending is what end would report, without ending anything: the last
// handle's commit is made while the file still counts as being written, so
// nobody sees it written by no one and not yet committed.
func (ws *writers) ending(n *node) (key string, owed, last bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.files[n]
	if w == nil || w.handles > 1 {
		return "", false, false
	}
	return w.key, w.owed, true
}

// keyOf is where n, being written, is now.
func (ws *writers) keyOf(n *node) (key string, writing bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.files[n]; w != nil {
		return w.key, true
	}
	return "", false
}

// lock takes the lock of n's key and returns the key: for a file being
// written the path it is at now, for another its path in the tree. A rename
// may move n while the lock is awaited, so the key is read again under the
// lock until it holds. ok is false for a file no longer in the tree.
func (ws *writers) lock(n *node) (key string, unlock func(), ok bool) {
	keyNow := func() (string, bool) {
		if k, writing := ws.keyOf(n); writing {
			return k, k != ""
		}
		return n.key()
	}
	for {
		key, ok := keyNow()
		if !ok {
			return "", func() {}, false
		}
		unlock := ws.locks.Lock(key)
		if again, ok := keyNow(); ok && again == key {
			return key, unlock, true
		}
		unlock()
	}
}

// moved follows a rename of oldKey to newKey: what is being written at or
// below oldKey is at newKey now, and what was at newKey has no path any
// more (replaced), or, for an exchange, is at oldKey. Callers hold both
// keys' locks, and moves exclusively for a directory.
func (ws *writers) moved(oldKey, newKey string, exchange bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var from, to []*writing
	for key, w := range ws.paths {
		switch {
		case under(key, oldKey):
			from = append(from, w)
		case under(key, newKey):
			to = append(to, w)
		}
	}
	for _, w := range append(from, to...) {
		delete(ws.paths, w.key)
		w.leave()
	}
	for _, w := range from {
		w.key = newKey + strings.TrimPrefix(w.key, oldKey)
		ws.paths[w.key] = w
	}
	for _, w := range to {
		if !exchange {
			w.key = "" // replaced: its writes are nobody's version now
			continue
		}
		w.key = oldKey + strings.TrimPrefix(w.key, newKey)
		ws.paths[w.key] = w
	}
}

// put records that a rename put n at name in parent, for parentOf until
// go-fuse has moved the node there.
func (ws *writers) put(n, parent *fs.Inode, name string) {
	ws.mu.Lock()
	earlier := make(map[*fs.Inode]place, len(ws.renamed))
	maps.Copy(earlier, ws.renamed)
	ws.renamed[n] = place{parent, name}
	ws.mu.Unlock()
	// Forget those the tree has caught up with since (go-fuse's lock, not
	// this one, guards a node's parent).
	for m, p := range earlier {
		if name, parent := m.Parent(); p.parent == parent && p.name == name {
			ws.mu.Lock()
			if ws.renamed[m] == p {
				delete(ws.renamed, m)
			}
			ws.mu.Unlock()
		}
	}
}

// parentOf is n's name and parent, as the last rename left them.
func (ws *writers) parentOf(n *fs.Inode) (string, *fs.Inode) {
	name, parent := n.Parent()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if p, ok := ws.renamed[n]; ok {
		if p.parent == parent && p.name == name {
			delete(ws.renamed, n) // the tree has caught up
		} else {
			return p.name, p.parent
		}
	}
	return name, parent
}

// unlinked follows an unlink of key: a file being written there has no
// path any more. Callers hold key's lock.
func (ws *writers) unlinked(key string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.paths[key]; w != nil {
		delete(ws.paths, key)
		w.key = ""
		w.leave()
	}
}

// under reports whether key is root or a path below it.
func under(key, root string) bool {
	return key == root || strings.HasPrefix(key, root+"/")
}
