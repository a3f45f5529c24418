package versionstore

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The whole workspace, walked. A checkpoint must pin every file, not only
// those dshfs happened to see: the first one indexes every file and keeps
// its bytes (the baseline), later ones look at each file once more (an
// lstat) and read only what changed behind dshfs's back. Once a baseline
// exists, a file the index does not know can only have been created since,
// so it is journaled as a creation, and a rewind removes it.

// SyncStats says what a walk of the workspace found.
type SyncStats struct {
	Files   int   `json:"files"`   // regular files in the workspace
	Read    int   `json:"read"`    // of them, read because the index did not know their bytes
	Kept    int64 `json:"kept"`    // bytes read and kept
	Skipped int   `json:"skipped"` // read but not kept: over the capture limit or the retention budget
	// Unread are the paths the walk could not look at (a directory it may
	// not list, a file it may not read), with why: the index does not know
	// what they hold now.
	Unread map[string]error `json:"-"`
}

func (st *SyncStats) unread(key string, err error) {
	if st.Unread == nil {
		st.Unread = map[string]error{}
	}
	st.Unread[key] = err
}

// Sync brings the index up to date with the whole workspace. Every regular
// file is indexed; one the index knows with an unchanged, settled
// fingerprint and its bytes kept costs an lstat, any other is read and its
// bytes kept while the store is within its retention budget. Files the
// index knows that are gone, or are no regular file now, are recorded as
// deleted. progress, if set, is told how far the walk has got. It fails
// (ReasonIndex) if the index could not record what it found: a checkpoint
// or rewind must not go on from an index that missed changes.
func (s *Store) Sync(ctx context.Context, progress func(done, total int)) (SyncStats, error) {
	return s.sync(ctx, "sync", progress)
}

// sync is Sync on behalf of op, which its failure names.
func (s *Store) sync(ctx context.Context, op string, progress func(done, total int)) (SyncStats, error) {
	var st SyncStats
	s.mount.awaitIdle(ctx)
	failed, _ := s.mount.batchFailures()
	known, err := s.indexedFiles()
	if err != nil {
		return st, indexReadError(op, "", err)
	}
	keys, err := s.walkFiles(ctx, &st)
	if err != nil {
		return st, err
	}
	st.Files = len(keys)
	for i, key := range keys {
		if ctx.Err() != nil {
			return st, fail(ReasonAborted, "sync", "")
		}
		if progress != nil && i%64 == 0 {
			progress(i, len(keys))
		}
		s.syncKnown(key, known[key], &st)
		delete(known, key)
	}
	for key, r := range known { // indexed, and not found by the walk
		if !r.Version.IsZero() {
			s.syncPath(key, &st)
		}
	}
	// What the walk found is committed in the mount's batches: if one
	// failed meanwhile (a full disk), the index is behind.
	s.flushPending()
	if n, err := s.mount.batchFailures(); n != failed {
		return st, indexError(op, "", err)
	}
	if progress != nil {
		progress(len(keys), len(keys))
	}
	if err := s.markBaseline(); err != nil {
		return st, indexError(op, "", err)
	}
	return st, nil
}

// walkFiles lists the workspace's regular files, noting in st the
// directories it could not list.
func (s *Store) walkFiles(ctx context.Context, st *SyncStats) ([]string, error) {
	var keys []string
	err := filepath.WalkDir(s.rootPath, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(s.rootPath, p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // removed meanwhile: nothing to see
				st.unread(filepath.ToSlash(rel), err)
			}
			return nil
		}
		if d.Type().IsRegular() {
			keys = append(keys, filepath.ToSlash(rel))
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, fail(ReasonAborted, "sync", "")
	}
	return keys, nil
}

// syncKnown looks at one file the walk found, r being its index entry.
func (s *Store) syncKnown(key string, r record, st *SyncStats) {
	fi, err := s.lstatKey(key)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			st.unread(key, err)
		}
		return
	}
	fp := fingerprintOf(fi)
	if r.FP == fp && !fp.racy(r.Recorded) && !r.Version.IsZero() {
		if !s.objects.keeps(fi.Size()) {
			return
		}
		kept, err := s.kept(r.Version)
		if err != nil {
			st.unread(key, indexReadError("sync", key, err))
		}
		if err != nil || kept {
			return
		}
	}
	if n, read := s.syncFile(key, s.withinBudget(), st); read {
		st.Read++
		st.Kept += n
		if n == 0 && fi.Size() > 0 {
			st.Skipped++
		}
	}
}

// withinBudget reports whether the object store and the index, with the
// bytes waiting in the batch, are within the retention budget.
func (s *Store) withinBudget() bool {
	pending := s.mount.queuedBytes()
	return s.retain.kept()+pending < s.retain.budget
}

// syncFile records what is at key now and keeps its bytes if keep (and the
// capture limit allows). It reports the bytes kept and whether the file was
// read.
func (s *Store) syncFile(key string, keep bool, st *SyncStats) (int64, bool) {
	unlock := s.locks.Lock(key)
	defer unlock()
	// No flush first: what this enqueues lands behind any commit of key
	// already in the batch, in the same transaction or a later one.
	if s.mount.writing(key) {
		return 0, false // the mount's commit will record it
	}
	return s.syncFileLocked(key, keep, st)
}

// syncFileLocked is syncFile under key's lock. A file gone, or no regular
// file now, since the walk is recorded as deleted; one it cannot read is
// noted in st.
func (s *Store) syncFileLocked(key string, keep bool, st *SyncStats) (int64, bool) {
	at := s.now()
	c, err := s.readForCapture(Target{Key: key, Display: key}, at, External, keep)
	switch code := CodeOf(err); {
	case code == CodeNotFound || code == CodeNotRegularFile:
		s.noteGone(key, at, st)
		return 0, false
	case err != nil:
		st.unread(key, err)
		return 0, false
	}
	if c.created, err = s.isNew(key); err != nil {
		st.unread(key, indexReadError("sync", key, err))
		return 0, false
	}
	if !keep && c.data == nil && s.objects.keeps(c.size) {
		c.unkept = unkeptBudget
	}
	n := int64(len(c.data))
	// Into the mount's batch: a walk of 20,000 files is a few transactions,
	// not 20,000.
	s.mount.enqueue(key, c)
	return n, true
}

// syncPath records what is at key, which the index has a file at and the
// walk found no regular file at: a deletion when there is no file, or no
// regular one (a symlink, directory or FIFO has no version of its own, as
// Refresh has it), so a rewind sees the change; a file the walk missed
// (created since, or below a directory it could not list) is read. Its
// commits join the batch.
func (s *Store) syncPath(key string, st *SyncStats) {
	unlock := s.locks.Lock(key)
	defer unlock()
	s.flushPending()
	if s.mount.writing(key) {
		return
	}
	// Not found by the walk: gone, unless a file came since, through real
	// directories. A link on the way is never followed.
	fi, err := s.lstatKey(key)
	switch {
	case err == nil && fi.Mode().IsRegular():
		s.syncFileLocked(key, s.withinBudget(), st)
	case err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		s.noteGone(key, s.now(), st)
	default:
		st.unread(key, err)
	}
}

// Look brings key's index entry up to date with its file before a person
// is told about it, as git status looks at a file before it answers: one
// whose fingerprint is unchanged and settled costs an lstat; one changed
// behind the store's back is read, recorded and its bytes kept (within the
// retention budget); one gone is a deletion. Its error is the index's,
// when key's entry cannot be read.
func (s *Store) Look(key string) error {
	var r record
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		r, _, err = getRecord(tx, key)
		return err
	})
	if err != nil {
		return err
	}
	var st SyncStats
	if fi, err := s.lstatKey(key); err == nil && fi.Mode().IsRegular() {
		s.syncKnown(key, r, &st)
	} else if !r.Version.IsZero() {
		s.syncPath(key, &st)
	}
	return nil
}

// indexedFiles is every index entry, by key.
func (s *Store) indexedFiles() (map[string]record, error) {
	out := map[string]record{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketFiles).ForEach(func(k, v []byte) error {
			r, _, err := getRecord(tx, string(k))
			if err != nil {
				return err
			}
			out[string(k)] = r
			return nil
		})
	})
	return out, err
}

// noteGone queues the deletion of key, found without a regular file, if
// the index has a version there.
func (s *Store) noteGone(key string, at time.Time, st *SyncStats) {
	v, err := s.indexVersion(key)
	switch {
	case err != nil:
		st.unread(key, indexReadError("sync", key, err))
	case !v.IsZero():
		s.mount.enqueue(key, change{writer: External, at: at})
	}
}

// isNew reports whether key, about to be recorded, is a file created since
// the baseline: one the index has no entry for once a walk has indexed
// everything.
func (s *Store) isNew(key string) (bool, error) {
	base, err := s.hasBaseline()
	if err != nil || !base {
		return false, err
	}
	found, err := s.indexed(key)
	return !found, err
}

// indexed reports whether the index has an entry for key; one that cannot
// be read is an error, not "no entry".
func (s *Store) indexed(key string) (found bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		_, found, err = getRecord(tx, key)
		return err
	})
	return found, err
}

// Baselined reports whether a walk (the first checkpoint's, or Sync) has
// indexed the whole workspace.
func (s *Store) Baselined() (bool, error) {
	base, err := s.hasBaseline()
	return base, wrapIndexRead("sync", "", err)
}

// hasBaseline reports whether a walk has indexed the whole workspace.
func (s *Store) hasBaseline() (found bool, err error) {
	if s.baselined.Load() {
		return true, nil
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(bucketMeta).Get(keyBaseline) != nil
		return nil
	})
	if found {
		s.baselined.Store(true)
	}
	return found, err
}

func (s *Store) markBaseline() error {
	if base, err := s.hasBaseline(); err != nil || base {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyBaseline, []byte(s.now().UTC().Format(time.RFC3339Nano)))
	})
	if err == nil {
		s.baselined.Store(true)
	}
	return err
}
