package fusefs

import (
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// Commits: when the mount records a version. A file being written (see
// writers.go) is committed at a flush or fsync after bytes were written, and
// at its last writer's release if a change is still owed; a change made in
// one operation (a truncate, a link, an unlink) at once.

// endWriting is called when a handle counted among n's writers is
// released; the last one records the version of the bytes on disk, written
// by w, if a change is owed. In passthrough mode ro is a read-only
// descriptor of the file (else -1), which endWriting closes: if the file is
// still open for writing elsewhere when its last writer lets go — a shared
// writable mapping that outlived its close — it stays being written until
// it is not (mapped.go).
func (f *FS) endWriting(n *node, w versionstore.Writer, ro int) {
	defer f.writers.holdMoves(false)() // a directory renamed above n is renamed whole first
	_, unlock, _ := f.writers.lock(n)
	defer unlock()
	f.endWritingLocked(n, w, ro)
}

// endWritingLocked is endWriting for a caller holding the key's lock.
func (f *FS) endWritingLocked(n *node, w versionstore.Writer, ro int) {
	if ro >= 0 {
		if f.writers.last(n) && f.stillMapped(ro) {
			f.linger(n, w, ro)
			return
		}
		unix.Close(ro)
	}
	if key, owed, last := f.writers.ending(n); last && owed && key != "" {
		_, err := f.mount.Refresh(key, w)
		f.logErr("commit version", key, err)
	}
	// Else others still write, it was committed since, or it left the tree.
	f.writers.end(n)
}

// commitWriting records the version of the bytes on disk, written by w,
// while handles stay open for writing (a flush or fsync): the file stays
// being written, so no tool mutation slips in after. With unseen
// (passthrough) the version stays owed.
func (f *FS) commitWriting(n *node, w versionstore.Writer, unseen bool) {
	defer f.writers.holdMoves(false)()
	_, unlock, ok := f.writers.lock(n)
	defer unlock()
	if !ok {
		return
	}
	if key, owed := f.writers.paid(n, unseen); owed {
		_, err := f.mount.Refresh(key, w)
		f.logErr("commit version", key, err)
	}
}

// refresh records the version of key after a change made in one operation
// (a truncate, a link, an unlink), unless n is being written: its writers'
// last commit will. Callers hold key's lock.
func (f *FS) refresh(n *node, key string, w versionstore.Writer) {
	if n != nil && f.writers.owe(n) {
		return
	}
	_, err := f.mount.Refresh(key, f.actors.attribute(w))
	f.logErr("commit version", key, err)
}

func (f *FS) logErr(what, key string, err error) {
	if err != nil {
		f.log.Error(what, "path", key, "err", err)
	}
}
