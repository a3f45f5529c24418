package fusefs

import (
	"time"

	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// A shared writable mapping outlives the close of its file: in passthrough
// mode it maps the backing file itself, and its writes reach the backing
// file without a request the daemon could see — after the file's last
// release. Such a mapping holds the backing file open for writing, which a
// read lease probe tells (writableElsewhere). So the last writer's release
// asks; while the answer is yes the file stays being written (no tool may
// replace it, its version stays owed) and is asked again, at growing
// intervals, until the mapping is gone; then its version is committed.
// The kernel closes a released file's backing file a moment after it sends
// the release, so the first question again comes soon.

// mappedFirst and mappedLast bound the interval between two questions.
const (
	mappedFirst = time.Millisecond
	mappedLast  = time.Second
)

// stillMapped reports whether the file open read-only at ro is open for
// writing elsewhere. A failed probe counts as no.
func (f *FS) stillMapped(ro int) bool {
	mapped, err := writableElsewhere(ro)
	if err != nil {
		f.log.Warn("passthrough: cannot tell whether a mapping still writes a file", "err", err)
	}
	return mapped
}

// linger keeps n being written after its last writer's release, for a
// mapping watched through ro. The bytes there now are a version already.
// Callers hold n's key's lock.
func (f *FS) linger(n *node, w versionstore.Writer, ro int) {
	if key := f.writers.linger(n, ro, w); key != "" {
		_, err := f.mount.Refresh(key, w)
		f.logErr("commit version", key, err)
	}
	time.AfterFunc(mappedFirst, func() { f.recheckMapped(n, w, mappedFirst) })
}

// recheckMapped asks again whether n's mapping still writes it, after
// having waited wait.
func (f *FS) recheckMapped(n *node, w versionstore.Writer, wait time.Duration) {
	defer f.writers.holdMoves(false)()
	_, unlock, _ := f.writers.lock(n)
	defer unlock()
	ro, handles := f.writers.mapping(n, false)
	switch {
	case ro < 0:
		return // ended by an unmount
	case handles == 1 && f.stillMapped(ro):
		wait = min(2*wait, mappedLast)
		time.AfterFunc(wait, func() { f.recheckMapped(n, w, wait) })
		return
	}
	// The mapping is gone, or a writer opened the file since (its release
	// asks again): the mapping's handle is counted out.
	f.endMapping(n, w)
}

// endMapping counts n's lingering mapping out of its writers, committing
// its version if that was the last. Callers hold n's key's lock.
func (f *FS) endMapping(n *node, w versionstore.Writer) {
	if ro, _ := f.writers.mapping(n, true); ro >= 0 {
		unix.Close(ro)
		f.endWritingLocked(n, w, -1)
	}
}

// endMappings ends every lingering mapping at unmount: what the mappings
// wrote so far is committed; what they write later is the next mount's to
// find.
func (f *FS) endMappings() {
	for n, w := range f.writers.lingering() {
		func() {
			defer f.writers.holdMoves(false)()
			_, unlock, _ := f.writers.lock(n)
			defer unlock()
			f.endMapping(n, w)
		}()
	}
}
