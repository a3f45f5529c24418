package versionstore

import (
	"context"
	"os"
	"testing"
	"time"
)

func (ts *testStore) edit(rel string, e Edit, expected *Version) (EditResult, error) {
	ts.t.Helper()
	tg, err := ts.Resolve(rel, "/ws/"+rel, "edit")
	if err != nil {
		return EditResult{}, err
	}
	return editText(context.Background(), ts.Store, tg, e, expected, ToolWriter("agent"))
}

func TestEditGuarded(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "a\r\nOLD\r\nb\r\n")
	v := ts.version("f")
	res, err := ts.edit("f", Edit{Old: "OLD", New: "NEW"}, &v)
	must(t, err)
	if got := ts.get("f"); got != "a\r\nNEW\r\nb\r\n" {
		t.Fatalf("on disk %q: CRLF not kept", got)
	}
	if res.Previous != v || res.Replacements != 1 {
		t.Fatalf("result = %+v", res)
	}
	if res.Version != SumString("a\r\nNEW\r\nb\r\n") {
		t.Fatal("version is not the hash of the written bytes")
	}
	// The returned version chains to the next edit.
	if _, err := ts.edit("f", Edit{Old: "NEW", New: "NEWER"}, &res.Version); err != nil {
		t.Fatal(err)
	}
}

// Staleness is checked before matching: a stale file never reports that
// old_string is missing or ambiguous.
func TestEditStaleBeforeMatching(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "x")
	v := ts.version("f")
	ts.put("f", "y y")
	for _, e := range []Edit{{Old: "zzz", New: "q"}, {Old: "y", New: "q"}, {Old: "y", New: "q", ReplaceAll: true}} {
		_, err := ts.edit("f", e, &v)
		wantErr(t, err, ReasonChanged, "", "/ws/f")
	}
	if ts.get("f") != "y y" {
		t.Fatal("stale edit landed")
	}
}

func TestEditUnguarded(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "a a a")
	must(t, os.Mkdir(ts.path("dir"), 0o755))
	_, err := ts.edit("f", Edit{Old: "x", New: "y"}, nil)
	mustIs(t, err, errNoMatch)
	_, err = ts.edit("f", Edit{Old: "a", New: "b"}, nil)
	mustIs(t, err, errAmbiguous)
	res, err := ts.edit("f", Edit{Old: "a", New: "b", ReplaceAll: true}, nil)
	must(t, err)
	if ts.get("f") != "b b b" || res.Replacements != 3 {
		t.Fatalf("replace all: %q %+v", ts.get("f"), res)
	}
	_, err = ts.edit("missing", Edit{Old: "a", New: "b"}, nil)
	wantErr(t, err, ReasonChanged, "", "/ws/missing")
	_, err = ts.edit("dir", Edit{Old: "a", New: "b"}, nil)
	wantErr(t, err, ReasonNotRegular, "", "/ws/dir")
}

func TestEditDeletedIsStale(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "x")
	v := ts.version("f")
	must(t, os.Remove(ts.path("f")))
	_, err := ts.edit("f", Edit{Old: "x", New: "y"}, &v)
	wantErr(t, err, ReasonChanged, "", "/ws/f")
	if _, err := os.Stat(ts.path("f")); err == nil {
		t.Fatal("edit recreated a deleted file")
	}
	h, err := ts.History("f")
	must(t, err)
	if len(h) == 0 || !h[0].Deleted || h[0].Writer.Kind != WriterExternal {
		t.Fatalf("deletion not recorded as external: %+v", h)
	}
}

func TestEditKeepsBOMAndMode(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "\uFEFFkey = old\r\n")
	must(t, os.Chmod(ts.path("f"), 0o600))
	res, err := ts.edit("f", Edit{Old: "old", New: "new"}, nil)
	must(t, err)
	if got := ts.get("f"); got != "\uFEFFkey = new\r\n" {
		t.Fatalf("on disk %q, want BOM and CRLF kept", got)
	}
	if res.Previous != SumString("\uFEFFkey = old\r\n") {
		t.Fatalf("previous = %s, want the version of the bytes edited", res.Previous)
	}
	if fi, _ := os.Stat(ts.path("f")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v", fi.Mode().Perm())
	}
	noTemps(t, ts.dir)
}

// Aliases share one key and one version: an edit through a symlink rewrites
// the real file, and a change through one name is stale through the other.
func TestEditThroughSymlinkAlias(t *testing.T) {
	ts := openTestStore(t)
	ts.put("real.txt", "one")
	must(t, os.Symlink("real.txt", ts.path("alias")))
	vLink := ts.version("alias")
	if vReal := ts.version("real.txt"); vLink != vReal {
		t.Fatal("aliases report different versions")
	}
	res, err := ts.edit("alias", Edit{Old: "one", New: "two"}, &vLink)
	must(t, err)
	if ts.get("real.txt") != "two" {
		t.Fatal("edit through link did not reach the real file")
	}
	_, err = ts.edit("real.txt", Edit{Old: "two", New: "three"}, &vLink)
	wantErr(t, err, ReasonChanged, "", "/ws/real.txt")
	_, err = ts.edit("real.txt", Edit{Old: "two", New: "three"}, &res.Version)
	must(t, err)
}

// The version is the content: touching a file or rewriting identical bytes
// keeps it, and a pending edit still succeeds; changing one byte behind the
// store's back makes it stale and is recorded as external.
func TestContentHashSemantics(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "stable content\n")
	v := ts.version("f")

	later := time.Now().Add(time.Hour)
	must(t, os.Chtimes(ts.path("f"), later, later)) // touch
	ts.put("f", "stable content\n")                 // identical rewrite (new ctime, new mtime)
	if got := ts.version("f"); got != v {
		t.Fatal("touch or identical rewrite changed the version")
	}
	res, err := ts.edit("f", Edit{Old: "stable", New: "edited"}, &v)
	must(t, err)

	must(t, os.WriteFile(ts.path("f"), []byte("edited content!"), 0o644)) // one byte more, behind its back
	_, err = ts.edit("f", Edit{Old: "edited", New: "again"}, &res.Version)
	wantErr(t, err, ReasonChanged, "", "/ws/f")

	h, err := ts.History("f")
	must(t, err)
	if len(h) < 3 || h[0].Writer.Kind != WriterExternal || h[0].Version != SumString("edited content!") ||
		h[1].Writer != ToolWriter("agent") || h[1].Version != res.Version {
		t.Fatalf("history = %+v", h)
	}
}
