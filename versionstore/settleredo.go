package versionstore

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Recovery of unsettled publishes: at Open, before anything is served, a
// record a crash left is finished — the acknowledged bytes put back where
// the file shows the publish lost, anything else left as it is (settle.go
// has the design).

// redoUnsettled finishes, at Open, the publishes a crash left unsettled:
// see settle.go. It runs before anything is served.
func (s *Store) redoUnsettled() error {
	left := map[string]unsettled{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketUnsettled).ForEach(func(k, v []byte) error {
			u, err := decodeUnsettled(v)
			if err != nil {
				// Not "nothing to finish": the write may be lost, and the
				// log is all that can say so.
				s.log.Error("read a tool write a crash may have lost", "path", string(k), "err", err)
				return nil
			}
			left[string(k)] = u
			return nil
		})
	})
	if err != nil || len(left) == 0 {
		return err
	}
	for key, u := range left {
		redone, err := s.redoOne(key, u)
		switch {
		case err != nil:
			s.log.Error("put back a tool write lost to a crash", "path", key, "version", u.Version.String(), "err", err)
		case redone:
			s.log.Warn("put back a tool write lost to a crash", "path", key, "version", u.Version.String())
		}
	}
	// Whatever could not be put back stays in history; the next access
	// records what the file holds now.
	return s.commits.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketUnsettled)
		for key := range left {
			if err := b.Delete([]byte(key)); err != nil {
				return err
			}
		}
		return nil
	})
}

// redoOne puts back the publish u of key if the file shows it was lost,
// and reports whether it did.
func (s *Store) redoOne(key string, u unsettled) (bool, error) {
	var current Version
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		r, ok, err := getRecord(tx, key)
		current, found = r.Version, ok
		return err
	})
	if err != nil || !found || current != u.Version {
		return false, err // a later change was recorded: it stands
	}
	t := Target{Key: key, Display: key}
	data, oerr := s.Object(u.Version) // nil if missing: a torn file goes unrecognised
	snap, lost, err := s.lostPublish(t, u, data)
	if err != nil || !lost {
		if err == nil {
			err = s.syncKey(key, map[string]bool{}) // landed: make it durable now
		}
		if errors.Is(err, errKeyDirGone) {
			err = nil // gone with its directory since: nothing to put back
		}
		return false, err
	}
	if oerr != nil {
		return false, oerr
	}
	// The bytes go back as their owner's file (owner.go), never given to
	// whoever owns the file found now: the path may have been replaced
	// since the cut by a user who could not read them.
	own, err := s.redoOwner(key, u)
	if err != nil {
		return false, err
	}
	if err := ownerConflict(t, snap, &own); err != nil {
		return false, err
	}
	mode := pubHow{create: snap.fi == nil}
	fi, err := s.publish(context.Background(), t, "", data, own.Perm, &own, &snap, mode)
	if err != nil {
		return false, err
	}
	if fi == nil {
		return true, nil
	}
	return true, s.commit([]string{key}, []change{{version: u.Version, fp: fingerprintOf(fi), size: fi.Size(), writer: External, at: s.now()}})
}

// redoOwner is who owned u's file when it was published, and its bits: as
// its history recorded them, or else the daemon's user.
func (s *Store) redoOwner(key string, u unsettled) (Owner, error) {
	o, err := s.versionOwner(key, u.Version)
	if err != nil {
		return Owner{}, err
	}
	if o != nil {
		return *o, nil
	}
	return Owner{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid()), Perm: u.Perm}, nil
}

// lostPublish reads key and says whether it shows u's publish, whose bytes
// are want, lost: the bytes before it, no file after a create, or a file
// torn where u had bytes.
func (s *Store) lostPublish(t Target, u unsettled, want []byte) (snapshot, bool, error) {
	var snap snapshot
	f, fi, err := s.openRegular(t, "read")
	if err != nil {
		if CodeOf(err) == CodeNotFound {
			return snap, u.NoFile, nil
		}
		return snap, false, err
	}
	defer f.Close()
	snap.fi, snap.fp = fi, fingerprintOf(fi)
	if fi.Size() > max(u.Size, 0)+(64<<20) {
		return snap, false, nil // grown far past it: written since
	}
	data, err := io.ReadAll(io.LimitReader(f, fi.Size()+1))
	if err != nil {
		return snap, false, err
	}
	v := Sum(data)
	snap.version = v
	switch {
	case v == u.Version:
		return snap, false, nil
	case slices.Contains(u.Before, v):
		return snap, true, nil
	case u.Size > 0 && torn(data, want):
		return snap, true, nil
	}
	return snap, false, nil
}

// torn reports whether data is what writeback may leave of want at a power
// cut: empty, zero-filled, the first pages only, or some pages with zeros
// where the others should be; no longer than want, and each byte its own
// or zero. Without want, only an empty or zero-filled file is.
func torn(data, want []byte) bool {
	if want != nil && len(data) > len(want) {
		return false
	}
	for i, c := range data {
		if c != 0 && (want == nil || c != want[i]) {
			return false
		}
	}
	return true
}
