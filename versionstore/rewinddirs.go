package versionstore

import (
	"errors"
	"path"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// A rewind removes the files created since the checkpoint; the directories
// made for them since would stay behind, empty, and a tree would not be
// the checkpoint's. So once the files are gone, each directory above one
// removed is removed too, deepest first, if it held no file at the
// checkpoint and is empty now. Only rmdir is used, through the descriptor
// of its parent opened without following a link (inKeyDir): a directory
// that holds anything, or a link where the directory was, is left alone.
// The index knows files, not directories: an empty directory that existed
// at the checkpoint is told from a new one by its birth time where the
// filesystem keeps one (bornBefore).

// birthSlack is how much earlier than the checkpoint a directory must have
// been born to count as there then: the filesystem's clock is coarser than
// the store's, and a directory made just after a checkpoint must not pass
// for an old one.
const birthSlack = time.Second

// removeNewDirs removes the directories emptied by the removal of removed
// (keys of files a rewind to cp removed) that held no file at cp. It
// returns the directories removed.
func (s *Store) removeNewDirs(cp Checkpoint, first map[string]JournalEntry, removed []string) []string {
	if len(removed) == 0 {
		return nil
	}
	held, err := s.dirsHeldAt(first)
	if err != nil {
		s.logErr("find the directories a rewind emptied", "", err)
		return nil // none removed: which held a file is not known
	}
	cands := map[string]bool{}
	for _, key := range removed {
		for d := path.Dir(key); d != "." && !held[d]; d = path.Dir(d) {
			cands[d] = true
		}
	}
	dirs := make([]string, 0, len(cands))
	for d := range cands {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { // deepest first
		di, dj := strings.Count(dirs[i], "/"), strings.Count(dirs[j], "/")
		return di > dj || di == dj && dirs[i] > dirs[j]
	})
	var gone []string
	for _, d := range dirs {
		if s.rmdirNew(d, cp.Time.Add(-birthSlack)) {
			gone = append(gone, d)
			if s.onPublish != nil {
				s.onPublish(d) // the kernel may cache the entry
			}
		}
	}
	return gone
}

// dirsHeldAt is every directory that held a file at the checkpoint whose
// first changes since are first: a file unchanged since has its version
// now, a changed one the version its first change replaced.
func (s *Store) dirsHeldAt(first map[string]JournalEntry) (map[string]bool, error) {
	held := map[string]bool{}
	hold := func(key string) {
		for d := path.Dir(key); d != "." && !held[d]; d = path.Dir(d) {
			held[d] = true
		}
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFiles).ForEach(func(k, _ []byte) error {
			if _, changed := first[string(k)]; !changed {
				// An entry that cannot be read may hold a file: its
				// directories stay.
				if r, _, err := getRecord(tx, string(k)); err != nil || !r.Version.IsZero() {
					hold(string(k))
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for k, e := range first {
		if !e.Prev.IsZero() || e.PrevUnknown {
			hold(k)
		}
	}
	return held, nil
}

// rmdirNew removes the directory key if it is empty and was not born
// before then (as far as the filesystem tells).
func (s *Store) rmdirNew(key string, then time.Time) bool {
	err := s.inKeyDir(key, false, func(d keyDir) error {
		if born, ok := bornAt(d.fd, d.name); ok && born.Before(then) {
			return errOld
		}
		return unix.Unlinkat(d.fd, d.name, unix.AT_REMOVEDIR)
	})
	return err == nil
}

// errOld stops rmdirNew at a directory older than the checkpoint.
var errOld = errors.New("born before the checkpoint")

// removedFiles are the files a rewind's actions removed.
func removedFiles(actions []RewindAction) []string {
	var out []string
	for _, a := range actions {
		if a.Op == "remove" && a.Err == nil {
			out = append(out, a.Path)
		}
	}
	return out
}
