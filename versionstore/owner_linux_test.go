package versionstore

import (
	"context"
	"encoding/json"
	"os"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// wantOwner fails unless rel holds content, belongs to uid:gid and has
// exactly the permission bits perm.
func (ts *testStore) wantOwner(rel, content string, uid, gid uint32, perm os.FileMode) {
	ts.t.Helper()
	var st syscall.Stat_t
	must(ts.t, syscall.Lstat(ts.path(rel), &st))
	if got := ts.get(rel); got != content || st.Uid != uid || st.Gid != gid || os.FileMode(st.Mode&0o7777) != perm {
		ts.t.Fatalf("%s: %q uid %d gid %d mode %o, want %q uid %d gid %d mode %o",
			rel, got, st.Uid, st.Gid, st.Mode&0o7777, content, uid, gid, perm)
	}
}

// putAs writes rel as uid:gid's file with permission bits perm, replacing
// what was there (a new inode, as a save by another user makes).
func (ts *testStore) putAs(rel, content string, uid, gid int, perm os.FileMode) {
	ts.t.Helper()
	os.Remove(ts.path(rel))
	ts.put(rel, content)
	must(ts.t, os.Chown(ts.path(rel), uid, gid))
	must(ts.t, os.Chmod(ts.path(rel), perm))
}

func (ts *testStore) rewind(name string) RewindResult {
	ts.t.Helper()
	res, err := ts.Rewind(context.Background(), name, RewindOptions{Writer: ToolWriter("me")})
	if err != nil {
		ts.t.Fatalf("rewind %s: %v", name, err)
	}
	return res
}

// A version's owner and permission bits are recorded with it, and a rewind
// puts them back with its bytes: a deleted file of another user comes back
// theirs, a file made readable to all since goes back to 0600 with its old
// bytes. (The bytes used to take the current file's owner and mode, and a
// recreated file the daemon's user.)
func TestRewindGivesBackOwnerAndMode(t *testing.T) {
	requireRoot(t)
	ts := openTestStore(t)
	ts.putAs("theirs.txt", "theirs\n", 65534, 65534, 0o640)
	ts.putAs("secret.txt", "secret\n", 0, 0, 0o600)
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	h, err := ts.History("theirs.txt")
	must(t, err)
	if len(h) != 1 || h[0].Owner == nil || *h[0].Owner != (Owner{Uid: 65534, Gid: 65534, Perm: 0o640}) {
		t.Fatalf("history of theirs.txt %+v: want its owner 65534:65534 0640 recorded", h)
	}
	must(t, os.Remove(ts.path("theirs.txt")))
	ts.putAs("secret.txt", "public\n", 0, 0, 0o644)

	if res := ts.rewind("cp"); res.Conflicts != 0 {
		t.Fatalf("rewind: %+v", res)
	}
	ts.wantOwner("theirs.txt", "theirs\n", 65534, 65534, 0o640)
	ts.wantOwner("secret.txt", "secret\n", 0, 0, 0o600)
}

// A chmod keeps a file's version, and its history says the bits it has
// now: restoring the version after the file is gone gives it those, not the
// ones it was first seen with.
func TestRestoreGivesTheVersionsLatestMode(t *testing.T) {
	requireRoot(t)
	ts := openTestStore(t)
	ts.putAs("token", "secret\n", 0, 0, 0o644)
	v := ts.version("token")
	must(t, os.Chmod(ts.path("token"), 0o600))
	if ts.version("token") != v {
		t.Fatal("a chmod changed the version")
	}
	must(t, os.Remove(ts.path("token")))
	_, err := ts.Restore(context.Background(), ts.target("token"), v, ToolWriter("me"))
	must(t, err)
	ts.wantOwner("token", "secret\n", 0, 0, 0o600)
}

// A file now owned by another user than the one whose bytes a rewind or
// restore would put back is a conflict, left alone: writing the bytes into
// it would hand them to its owner.
func TestPutBackOverAnotherOwnerIsAConflict(t *testing.T) {
	requireRoot(t)
	ts := openTestStore(t)
	ts.putAs("token", "secret\n", 0, 0, 0o600)
	v := ts.version("token")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	ts.putAs("token", "mine\n", 65534, 65534, 0o644)

	res := ts.rewind("cp")
	if res.Conflicts != 1 || len(res.Actions) != 1 {
		t.Fatalf("rewind: %+v, want one conflict", res)
	}
	wantErr(t, res.Actions[0].Err, ReasonOwnerChanged, "restore", "token")
	ts.wantOwner("token", "mine\n", 65534, 65534, 0o644)

	_, err := ts.Restore(context.Background(), ts.target("token"), v, ToolWriter("me"))
	wantErr(t, err, ReasonOwnerChanged, "restore", "/ws/token")
	ts.wantOwner("token", "mine\n", 65534, 65534, 0o644)
}

// Entries recorded before owners were (an index of an earlier dshfs) have
// none: the bytes go back as the daemon's user's, with the stricter of the
// file's mode and the default (execute bits kept).
func TestPutBackWithUnknownOwner(t *testing.T) {
	requireRoot(t)
	ts := openTestStore(t)
	ts.putAs("f.txt", "one\n", 0, 0, 0o644)
	ts.putAs("g.txt", "one\n", 0, 0, 0o600)
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	ts.putAs("f.txt", "two\n", 0, 0, 0o666)
	ts.putAs("g.txt", "theirs\n", 65534, 65534, 0o644)
	ts.version("f.txt")
	ts.version("g.txt")
	forgetOwners(t, ts.Store)

	res := ts.rewind("cp")
	if res.Conflicts != 1 || len(res.Actions) != 2 {
		t.Fatalf("rewind: %+v, want g.txt as the one conflict", res)
	}
	for _, a := range res.Actions {
		if (a.Path == "g.txt") != (a.Err != nil) {
			t.Errorf("rewind of %s: %v", a.Path, a.Err)
		}
	}
	// The daemon's user wrote f.txt's bytes: they come back as its file,
	// with the stricter of the bits it had and the default.
	ts.wantOwner("f.txt", "one\n", 0, 0, 0o644)
	// g.txt is nobody's now, and its bytes were root's: left alone.
	ts.wantOwner("g.txt", "theirs\n", 65534, 65534, 0o644)
}

// forgetOwners strips the owners from every history and journal entry, as
// an index written before they were recorded has them.
func forgetOwners(t *testing.T, s *Store) {
	t.Helper()
	s.flushPending()
	must(t, s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketHistory, bucketJournal} {
			b := tx.Bucket(name)
			var keys, vals [][]byte
			b.ForEach(func(k, v []byte) error {
				var m map[string]any
				if err := json.Unmarshal(v, &m); err != nil {
					return err
				}
				delete(m, "owner")
				delete(m, "prev_owner")
				nv, err := json.Marshal(m)
				keys, vals = append(keys, append([]byte(nil), k...)), append(vals, nv)
				return err
			})
			for i := range keys {
				if err := b.Put(keys[i], vals[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

// Bytes put back never land in a directory another user owns now: that
// user could take them there (link, rename, read with the mode they get).
// Root's key, deleted with its 0700 directory, and the directory made again
// by nobody, is a conflict for a rewind and a restore, and nothing is
// written. (The key used to come back into nobody's directory.)
func TestPutBackIntoAnotherUsersDirectoryIsAConflict(t *testing.T) {
	requireRoot(t)
	ts := openTestStore(t)
	ts.put("secret/key", "")
	must(t, os.Chmod(ts.path("secret"), 0o700))
	ts.putAs("secret/key", "root's key\n", 0, 0, 0o600)
	v := ts.version("secret/key")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	must(t, os.RemoveAll(ts.path("secret")))
	must(t, os.Mkdir(ts.path("secret"), 0o755))
	must(t, os.Lchown(ts.path("secret"), 65534, 65534))

	res := ts.rewind("cp")
	if res.Conflicts != 1 || len(res.Actions) != 1 {
		t.Fatalf("rewind: %+v, want one conflict", res)
	}
	wantErr(t, res.Actions[0].Err, ReasonDirOwner, "restore", "secret/key")
	_, err := ts.Restore(context.Background(), ts.target("secret/key"), v, ToolWriter("me"))
	wantErr(t, err, ReasonDirOwner, "restore", "/ws/secret/key")
	if _, err := os.Lstat(ts.path("secret/key")); !os.IsNotExist(err) {
		t.Fatalf("secret/key put back into nobody's directory (lstat: %v)", err)
	}
}

// A directory the bytes' owner or root owns takes them back: nobody's
// deleted file returns into root's directory, and into nobody's own.
func TestPutBackIntoOwnersOrRootsDirectory(t *testing.T) {
	requireRoot(t)
	ts := openTestStore(t)
	ts.put("mine/f", "")
	must(t, os.Lchown(ts.path("mine"), 65534, 65534))
	ts.putAs("mine/f", "nobody's\n", 65534, 65534, 0o600)
	ts.putAs("g", "nobody's too\n", 65534, 65534, 0o644)
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	must(t, os.Remove(ts.path("mine/f")))
	must(t, os.Remove(ts.path("g")))
	if res := ts.rewind("cp"); res.Conflicts != 0 {
		t.Fatalf("rewind: %+v", res)
	}
	ts.wantOwner("mine/f", "nobody's\n", 65534, 65534, 0o600)
	ts.wantOwner("g", "nobody's too\n", 65534, 65534, 0o644)
}
