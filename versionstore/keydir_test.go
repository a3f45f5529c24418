package versionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A workspace shared by two users: att/ is the attacker's, victim/ holds
// another user's files. The journal knows att/sub/ as a directory; the
// attacker then puts a symlink to ../victim in its place, straight in the
// backing directory. Every store operation on a journal key under att/sub
// must now refuse it, not act on victim/ through the link.

const (
	victimCfg = "victim's config\n"
	victimEnv = "SECRET=victim's\n"
)

// symlinkedParent builds that workspace: a checkpoint "cp" with
// att/sub/keep.txt, then changes the journal knows (keep.txt rewritten,
// important.cfg and .env created), then att/sub swapped for the link.
func symlinkedParent(t *testing.T) *testStore {
	t.Helper()
	ts := openTestStore(t)
	ts.put("victim/important.cfg", victimCfg)
	ts.put("victim/.env", victimEnv)
	ts.put("victim/keep.txt", "victim's keep\n")
	must(t, os.Chmod(ts.path("victim/.env"), 0o600))
	ts.put("att/sub/keep.txt", "one\n")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	ts.put("att/sub/keep.txt", "two\n")
	ts.put("att/sub/important.cfg", "mine\n")
	ts.put("att/sub/.env", "mine\n")
	if _, err := ts.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	must(t, os.Rename(ts.path("att/sub"), ts.path("att/old")))
	must(t, os.Symlink("../victim", ts.path("att/sub")))
	return ts
}

// treeState describes every entry below dir: mode, inode, size, mtime and
// bytes, so that any creation, change or removal shows.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v ino=%d uid=%d size=%d mtime=%d", fi.Mode(), st.Ino, st.Uid, fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %q", b)
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func wantSameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s was %s, now %q", what, k, v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s appeared: %s", what, k, v)
		}
	}
}

// wantNeverHeld fails if the history of key ever held one of the victim's
// versions: the store read a victim's file through the link.
func (ts *testStore) wantNeverHeld(key string, contents ...string) {
	ts.t.Helper()
	h, err := ts.History(key)
	must(ts.t, err)
	for _, e := range h {
		for _, c := range contents {
			if e.Version == SumString(c) {
				ts.t.Errorf("history of %s holds the victim's %q: read through the link", key, c)
			}
		}
	}
}

// Sync looks for the files the journal knows under att/sub; the walk does
// not find them (it does not follow the link), so they are gone. It used to
// lstat and read each one by its path, through the link, and record the
// victim's bytes as the attacker's file's version.
func TestSyncDoesNotReadThroughSymlinkedParent(t *testing.T) {
	ts := symlinkedParent(t)
	if _, err := ts.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keep.txt", "important.cfg", ".env"} {
		key := "att/sub/" + name
		ts.wantNeverHeld(key, victimCfg, victimEnv, "victim's keep\n")
		if v, err := ts.indexVersion(key); err != nil || !v.IsZero() {
			t.Errorf("%s: index holds %s (%v), want it gone", key, v.Short(), err)
		}
	}
}

// A rewind to "cp" would remove important.cfg and .env and put keep.txt
// back, under att/sub: through the link that is the victim's directory.
// It used to delete victim/important.cfg and victim/.env, overwrite
// victim/keep.txt, and (through its own checkpoint's walk) record the
// victim's .env as the attacker's .env, which rewinding the rewind wrote
// into the attacker's directory. A key whose parent is not a real
// directory is a conflict, and the store neither reads nor writes there.
func TestRewindDoesNotActThroughSymlinkedParent(t *testing.T) {
	ts := symlinkedParent(t)
	before := treeState(t, ts.path("victim"))
	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	must(t, err)
	wantSameTree(t, "rewind", before, treeState(t, ts.path("victim")))
	under := 0
	for _, a := range res.Actions {
		if !strings.HasPrefix(a.Path, "att/sub/") {
			continue // att/old/*: created since the checkpoint, removed
		}
		under++
		if a.Err == nil {
			t.Errorf("rewind of %s (%s) is not a conflict", a.Path, a.Op)
		}
	}
	if under != 3 {
		t.Errorf("rewind %+v: %d actions under att/sub, want 3 conflicts", res, under)
	}
	for _, name := range []string{"keep.txt", "important.cfg", ".env"} {
		ts.wantNeverHeld("att/sub/"+name, victimCfg, victimEnv, "victim's keep\n")
	}

	// Restore of a journal key under the link, as the CLI's restore of a
	// version from the key's history does.
	tg := Target{Key: "att/sub/keep.txt", Display: "att/sub/keep.txt"}
	if _, err := ts.Restore(context.Background(), tg, SumString("one\n"), ToolWriter("me")); err == nil {
		t.Error("restore through the link succeeded")
	}
	wantSameTree(t, "restore", before, treeState(t, ts.path("victim")))

	// Undoing the rewind puts back what its checkpoint pinned: nothing of
	// the victim's may come out under att/.
	if _, err := ts.Rewind(context.Background(), res.Before, RewindOptions{Writer: ToolWriter("me")}); err != nil {
		t.Fatal(err)
	}
	wantSameTree(t, "undo", before, treeState(t, ts.path("victim")))
	must(t, os.Remove(ts.path("att/sub")))
	for rel, desc := range treeState(t, ts.path("att")) {
		for _, c := range []string{victimCfg, victimEnv} {
			if containsQuoted(desc, c) {
				t.Errorf("att/%s holds the victim's bytes: %s", rel, desc)
			}
		}
	}
}

func containsQuoted(desc, content string) bool {
	q := fmt.Sprintf("%q", content)
	return len(desc) >= len(q) && desc[len(desc)-len(q):] == q
}

// openDir opens real directories below the root only, and creates the
// missing ones.
func TestWalkDir(t *testing.T) {
	ts := openTestStore(t)
	ts.put("a/b/f", "x")
	must(t, os.Symlink("a", ts.path("link")))
	must(t, os.Symlink("b", ts.path("a/blink")))
	for _, c := range []struct {
		dir    string
		create bool
		want   error // nil: opened
	}{
		{"a/b", false, nil},
		{"a/b/", false, nil},
		{"link", false, syscall.ENOTDIR},
		{"link/b", true, syscall.ENOTDIR},
		{"a/blink", false, syscall.ENOTDIR},
		{"a/b/f", false, syscall.ENOTDIR},
		{"a/b/f/g", true, syscall.ENOTDIR},
		{"a/c", false, fs.ErrNotExist},
		{"a/c/d", true, nil},
		{"../a", false, syscall.EXDEV},
	} {
		err := ts.inKeyDir(c.dir+"/x", c.create, func(keyDir) error { return nil })
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("open %s (create %v): %v, want %v", c.dir, c.create, err, c.want)
		}
	}
	if fi, err := os.Lstat(ts.path("a/c/d")); err != nil || !fi.IsDir() {
		t.Errorf("a/c/d not created: %v", err)
	}
	if _, err := os.Lstat(ts.path("a/b/f/g")); err == nil {
		t.Error("a/b/f/g created")
	}
}
