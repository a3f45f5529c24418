package versionstore

import (
	"io/fs"
	"os"

	bolt "go.etcd.io/bbolt"
)

// Whose bytes a restore or rewind puts back. A version's bytes belong to
// the user who owned the file while it had them: they go back into a file
// of that user's, with the permission bits it had, never into whatever file
// holds the path now. Otherwise a user who may replace a file (a shared
// directory, a mount with allow_other) would get another user's bytes
// written into a file of their own: root's 0600 token, rewound into
// nobody's 0644 file. A path now owned by another user than the bytes' is
// a conflict, left alone.

// putBackOwner is the owner and permission bits the bytes of v put back at
// t get, over cur: owner, those recorded with the version, unless another
// user owns the file now (ReasonOwnerChanged). With owner unknown (nil: an
// entry of an earlier dshfs), the daemon's user and the stricter of the
// bits the file has (or last had) and the default, execute bits kept; and
// a file now owned by another user than the one who wrote the bytes is a
// conflict all the same.
func (s *Store) putBackOwner(t Target, v Version, cur snapshot, owner *Owner) (Owner, error) {
	if owner != nil {
		if err := ownerConflict(t, cur, owner); err != nil {
			return Owner{}, err
		}
		return *owner, nil
	}
	uid, err := s.writerUID(t.Key, v)
	if err != nil {
		return Owner{}, indexReadError("restore", t.Display, err)
	}
	if err := ownerConflict(t, cur, &Owner{Uid: uid}); err != nil {
		return Owner{}, err
	}
	perm := s.fileMode
	if cur.fi != nil {
		perm = cur.fi.Mode().Perm()
	} else if last, err := s.lastPerm(t.Key); err != nil {
		return Owner{}, indexReadError("restore", t.Display, err)
	} else if last != 0 {
		perm = last
	}
	return Owner{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid()), Perm: perm & (s.fileMode | 0o111)}, nil
}

// ownerConflict refuses to put back at t, over cur, bytes that owner's
// user owned when another user owns the file now.
func ownerConflict(t Target, cur snapshot, owner *Owner) error {
	if owner == nil || cur.fi == nil {
		return nil
	}
	if uid, _, ok := ownerOf(cur.fi); ok && uint32(uid) != owner.Uid {
		return fail(ReasonOwnerChanged, "restore", t.Display)
	}
	return nil
}

// dirOwnerConflict refuses to put bytes that owner's user owned into d,
// the directory of t, when d belongs to another user than theirs or root:
// that user could rename, link or (as the mode allows) read them there.
// Owner and root alone can do so in a directory they own.
func dirOwnerConflict(d keyDir, t Target, verb string, owner *Owner) error {
	uid, err := d.uid()
	if err != nil {
		return osError(verb, t.Display, err)
	}
	if uid != owner.Uid && uid != 0 {
		return fail(ReasonDirOwner, verb, t.Display)
	}
	return nil
}

// versionOwner is the owner recorded with the newest entry of key's history
// that has version v; nil if none says.
func (s *Store) versionOwner(key string, v Version) (o *Owner, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		h, err := readHistory(tx, key)
		for _, e := range h {
			if e.Version == v && e.Owner != nil {
				o = e.Owner
				break
			}
		}
		return err
	})
	return o, err
}

// writerUID is the user who wrote version v of key, as its newest history
// entry with v says: the caller's uid for a write through the mount, the
// daemon's user for a tool's write, and for a change made behind dshfs's
// back (whose writer is unknown), the daemon's user too, the cautious
// choice: a file another user owns now is then left alone.
func (s *Store) writerUID(key string, v Version) (uint32, error) {
	uid := uint32(os.Geteuid())
	err := s.db.View(func(tx *bolt.Tx) error {
		h, err := readHistory(tx, key)
		for i := len(h) - 1; i >= 0; i-- {
			if h[i].Version == v {
				if h[i].Writer.Kind == WriterMount {
					uid = h[i].Writer.Uid
				}
				break
			}
		}
		return err
	})
	return uid, err
}

// lastPerm is the permission bits the index last saw key with; zero if it
// never saw them.
func (s *Store) lastPerm(key string) (perm fs.FileMode, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		r, _, err := getRecord(tx, key)
		perm = r.Perm
		return err
	})
	return perm, err
}

// giveOwner makes o the owner of f, a new file not published yet. A daemon
// that may not (an ordinary user's) leaves it its own; if the group could
// not be given either, the group loses its access: the bytes were for o's
// group, not the daemon's.
func giveOwner(f *os.File, o *Owner) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	uid, gid, ok := ownerOf(fi)
	if !ok || uint32(uid) == o.Uid && uint32(gid) == o.Gid {
		return nil
	}
	if f.Chown(int(o.Uid), int(o.Gid)) == nil || f.Chown(-1, int(o.Gid)) == nil {
		return nil
	}
	if uint32(gid) != o.Gid {
		return f.Chmod(o.Perm &^ 0o070)
	}
	return nil
}
