package versionstore

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Capture: the bytes of every version committed through the mount or by a
// tool are kept in the object store, and so are the bytes a file had before
// its first change — a file that existed before dshfs saw it is restorable
// too. The journal (journal.go) records each change with the version it
// replaced, which is what checkpoints and rewind are built on.

// preserveLocked is Preserve; queued makes the record join the mount's
// pending batch instead of committing at once.
func (s *Store) preserveLocked(key string, queued bool) (absent bool) {
	s.settleUnder(key, true) // a tool's publish there is on disk, and done, before the change
	if s.mount.born(key) {
		return false // created by the change in progress: nothing came before
	}
	at := s.now() // before the stat, for the racy rule
	fi, err := s.lstatKey(key)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	if !fi.Mode().IsRegular() || !s.objects.capturing() {
		return false
	}
	fp := fingerprintOf(fi)
	if s.mount.writing(key) {
		// A process is writing the file through the mount: its bytes so far
		// are kept, but recorded by nobody — the writer's commit attributes
		// the change.
		c, err := s.readForCapture(Target{Key: key, Display: key}, at, External, true)
		if err == nil && c.data != nil {
			c.keepOnly = true
			s.mount.enqueue(key, c)
		}
		return false
	}
	if s.keptInBatch(key, fi, fp) {
		return false
	}
	known, unknown, err := s.keptAlready(key, fi, fp)
	if err != nil || known {
		// An entry that cannot be read cannot be updated either: the
		// change's own commit will fail and say so.
		s.logErr("read index", key, err)
		return false
	}
	c, err := s.readForCapture(Target{Key: key, Display: key}, at, External, true)
	if err != nil {
		s.logErr("keep the bytes before a change", key, err)
		return false
	}
	base, err := s.hasBaseline()
	if err != nil {
		s.logErr("read index", key, err)
		return false
	}
	c.created = unknown && base // after a baseline, an unknown file is new
	if queued {
		s.mount.enqueue(key, c)
		return false
	}
	s.logErr("keep the bytes before a change", key, s.commit([]string{key}, []change{c}))
	return false
}

// readForCapture reads t for a commit: the version of its bytes and, if
// keep and up to the capture limit, the bytes themselves.
func (s *Store) readForCapture(t Target, at time.Time, w Writer, keep bool) (change, error) {
	f, fi, err := s.openRegular(t, "read")
	if err != nil {
		return change{}, err
	}
	defer f.Close()
	c := change{fp: fingerprintOf(fi), size: fi.Size(), writer: w, at: at, statFirst: true}
	if !s.objects.hashes(fi.Size()) {
		c.version = unhashedVersion(c.fp)
		return c, nil
	}
	if !keep || !s.objects.keeps(fi.Size()) {
		v, _, err := HashReader(f)
		if err != nil {
			return change{}, osError("read", t.Display, err)
		}
		c.version = v
		return c, nil
	}
	data := make([]byte, 0, fi.Size()+1)
	n, err := readExtents(f, fi, data[:fi.Size()]) // the rest, and any growth, read on
	if err != nil {
		return change{}, osError("read", t.Display, err)
	}
	data = data[:n]
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return change{}, osError("read", t.Display, err)
		}
		if len(data) == cap(data) {
			if !s.objects.keeps(int64(len(data))) {
				// Grew past the limit while being read: version it, keep nothing.
				c, err := s.grownVersion(f, data, c)
				if err != nil {
					return change{}, osError("read", t.Display, err)
				}
				return c, nil
			}
			data = append(data, 0)[:len(data)]
		}
	}
	c.version = Sum(data)
	c.size = int64(len(data))
	c.data = data
	return c, nil
}

// grownVersion versions the file f, which grew past the capture limit
// while being read (data so far) for the change c: by the rest of its bytes,
// or by its stat if it is past the hashing limit now (unhashed.go).
func (s *Store) grownVersion(f *os.File, data []byte, c change) (change, error) {
	if fi, err := f.Stat(); err == nil && !s.objects.hashes(fi.Size()) {
		c.fp, c.size = fingerprintOf(fi), fi.Size()
		c.version = unhashedVersion(c.fp)
		return c, nil
	}
	v, n, err := HashReader(io.MultiReader(bytes.NewReader(data), f))
	if err != nil {
		return change{}, err
	}
	c.version, c.size = v, n
	return c, nil
}

// keptAlready reports whether the index holds key's file with fingerprint
// fp (of stat fi), settled, and its bytes are kept or never would be
// (known); and whether it has no entry for key at all (unknown). An entry
// that cannot be read is an error, never "unknown".
func (s *Store) keptAlready(key string, fi fs.FileInfo, fp fingerprint) (known, unknown bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		r, found, err := getRecord(tx, key)
		known = found && r.FP == fp && (!fp.racy(r.Recorded) || s.mount.statedFirst(key, r) && s.statProves(fi)) &&
			!r.Version.IsZero() &&
			(s.objects.present(tx, r.Version) || !s.objects.keeps(fi.Size()))
		unknown = !found
		return err
	})
	return known, unknown, err
}

// keptInBatch is keptAlready for a change of key that waits in the mount's
// batch: a file written through the mount and closed less than a batch
// interval ago, whose bytes that change carries.
func (s *Store) keptInBatch(key string, fi fs.FileInfo, fp fingerprint) bool {
	q, ok := s.mount.queuedAs(key)
	return ok && q.fp == fp && !q.version.IsZero() && (!fp.racy(q.at.UnixNano()) || q.statFirst && s.statProves(fi)) &&
		(q.kept || !s.objects.keeps(fi.Size()))
}

// statProves reports whether a fingerprint of fi equal to a recorded one
// proves the file unchanged since, however soon after the recording: on a
// filesystem with fine ctimes (probeFineCtime), any change after the
// recording's stat moved the ctime. Elsewhere a fingerprint close to its
// recording is racy (fingerprint.go). It is asked only of fingerprints
// taken before their bytes were read (change.statFirst, Mount.statedFirst),
// and only before a change, for whether its bytes are kept.
func (s *Store) statProves(fi fs.FileInfo) bool {
	dev, ok := deviceOf(fi)
	return ok && s.fineCtime && dev == s.fineDev
}
