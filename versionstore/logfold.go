package versionstore

import (
	"slices"
	"time"
)

// The log reads as what happened: the steps a program takes to replace a
// file are folded into the one change of content they make. An editor's
// or sed -i's rename-save (a temporary file created, written, renamed over
// the file) is one write of the file, through the temporary name (Via);
// git's checkout of a file (unlinked, then created again by the same
// process) is one write too. The journal keeps every step: checkpoints and
// rewind read it, not the log.

// foldWindow bounds how long apart a deletion and a creation of one path
// by one process may be to read as one write.
const foldWindow = 2 * time.Second

// foldSteps folds changes, newest first, as above.
func foldSteps(changes []Change) []Change {
	drop := make([]bool, len(changes))
	created := map[string][]int{}            // a temporary path: its entries since its creation
	deleted := map[string]int{}              // a path: its deletion, if that is its last entry
	for i := len(changes) - 1; i >= 0; i-- { // oldest first
		c := &changes[i]
		switch c.Op {
		case "create":
			if j, ok := deleted[c.Path]; ok && sameProcess(changes[j].Writer, c.Writer) && c.Time.Sub(changes[j].Time) <= foldWindow {
				drop[j] = true
				c.Prev, c.PrevUnknown, c.PrevOwner, c.Op = changes[j].Prev, changes[j].PrevUnknown, changes[j].PrevOwner, "write"
				delete(deleted, c.Path)
				delete(created, c.Path)
				break
			}
			created[c.Path] = []int{i}
			delete(deleted, c.Path)
		case "write":
			if steps, ok := created[c.Path]; ok {
				created[c.Path] = append(steps, i)
			}
			delete(deleted, c.Path)
		case "delete":
			delete(created, c.Path)
			deleted[c.Path] = i
		case "rename":
			if !drop[i] { // a departure folded with its arrival is done
				foldRename(changes, drop, created, i)
			}
			delete(deleted, c.Path)
		}
	}
	out := changes[:0]
	for i, c := range changes {
		if !drop[i] {
			out = append(out, c)
		}
	}
	return out
}

// foldRename folds the rename at changes[i], if it is the arrival of a
// temporary file created since over an existing file: the temporary file's
// creation, writes and departure go, and the arrival becomes a write of the
// file through it. An arrival with no departure beside it is of a file that
// never had a version under its old name: a save too.
func foldRename(changes []Change, drop []bool, created map[string][]int, i int) {
	c := &changes[i]
	if c.From == "" {
		return // a departure: its arrival, next to it, decides
	}
	if c.Prev.IsZero() && !c.PrevUnknown {
		return // onto no file: a move, not a save
	}
	steps, ok := created[c.From]
	away := -1 // the departure, journaled next to the arrival
	for _, j := range []int{i - 1, i + 1} {
		if j >= 0 && j < len(changes) && changes[j].Path == c.From && changes[j].To == c.Path {
			away = j
		}
	}
	if !ok && away < 0 {
		// The temporary file never had a version: its writer let it go
		// only after the rename, so its bytes were first committed under
		// the file's name, and the arrival is the whole save.
		delete(created, c.Path)
		c.Via, c.From, c.Op = c.From, "", "write"
		return
	}
	if !ok || away < 0 {
		delete(created, c.Path)
		return
	}
	for _, j := range append(slices.Clone(steps), away) {
		drop[j] = true
	}
	delete(created, c.From)
	delete(created, c.Path)
	c.Via, c.From, c.Op = c.From, "", "write"
}

// sameProcess reports whether a and b are the same writer, and for the
// mount, the same process.
func sameProcess(a, b Writer) bool {
	return a.Kind == b.Kind && a.Actor == b.Actor && a.Pid == b.Pid && a.Comm == b.Comm
}
