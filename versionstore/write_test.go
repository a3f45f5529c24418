package versionstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"testing"
)

var (
	createOnly = Intent{Kind: IntentCreateIfAbsent}
	anyway     = Intent{}
)

func replaceAt(v Version) Intent { return Intent{Kind: IntentReplaceIfVersion, Version: v} }

func (ts *testStore) write(rel, content string, in Intent) (WriteResult, error) {
	ts.t.Helper()
	tg, err := ts.Resolve(rel, "/ws/"+rel, "write")
	if err != nil {
		return WriteResult{}, err
	}
	return ts.WriteText(context.Background(), tg, content, in, ToolWriter("agent"))
}

func TestWriteCreateIfAbsent(t *testing.T) {
	ts := openTestStore(t)
	res, err := ts.write("new.txt", "hello", createOnly)
	must(t, err)
	if !res.Created || !res.Previous.IsZero() || res.Version != SumString("hello") {
		t.Fatalf("result = %+v", res)
	}
	if ts.get("new.txt") != "hello" {
		t.Fatal("content not written")
	}
	fi, err := os.Stat(ts.path("new.txt"))
	must(t, err)
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("new file mode = %v, want 0644 (0666 less the umask)", fi.Mode().Perm())
	}

	_, err = ts.write("new.txt", "clobber", createOnly)
	wantErr(t, err, ReasonExists, "write", "/ws/new.txt")
	if ts.get("new.txt") != "hello" {
		t.Fatal("guarded create replaced an existing file")
	}
	noTemps(t, ts.dir)
}

// A file created by someone else between the store's check and its publish
// survives: the hard-link publish refuses to replace it, and the message
// names the path as the caller wrote it, through a symlinked directory.
func TestWriteCreateRaceCompetitorPreserved(t *testing.T) {
	ts := openTestStore(t)
	must(t, os.Mkdir(ts.path("real"), 0o755))
	must(t, os.Symlink("real", ts.path("link")))
	tg, err := ts.Resolve("link/f.txt", "/ws/link/f.txt", "write")
	must(t, err)
	ts.beforePublish = func() { ts.put("real/f.txt", "competitor") }
	_, err = ts.WriteText(context.Background(), tg, "mine", createOnly, ToolWriter("agent"))
	wantErr(t, err, ReasonExists, "write", "/ws/link/f.txt")
	if ts.get("real/f.txt") != "competitor" {
		t.Fatal("competitor overwritten")
	}

	// A directory appearing there instead is not a regular file.
	tg, err = ts.Resolve("link/d", "/ws/link/d", "write")
	must(t, err)
	ts.beforePublish = func() { must(t, os.Mkdir(ts.path("real/d"), 0o755)) }
	_, err = ts.WriteText(context.Background(), tg, "mine", createOnly, ToolWriter("agent"))
	wantErr(t, err, ReasonNotRegular, "write", "/ws/link/d")
	ts.beforePublish = nil
	noTemps(t, ts.dir)
}

func TestWriteNotRegular(t *testing.T) {
	ts := openTestStore(t)
	must(t, os.Mkdir(ts.path("dir"), 0o755))
	must(t, os.Symlink("nowhere", ts.path("dangling")))
	for _, in := range []Intent{anyway, createOnly, replaceAt(SumString("x"))} {
		_, err := ts.write("dir", "x", in)
		wantErr(t, err, ReasonNotRegular, "write", "/ws/dir")
	}
	for _, in := range []Intent{anyway, createOnly} {
		_, err := ts.write("dangling", "x", in)
		wantErr(t, err, ReasonNotRegular, "write", "/ws/dangling")
		if target, err := os.Readlink(ts.path("dangling")); err != nil || target != "nowhere" {
			t.Fatalf("dangling link not preserved: %q %v", target, err)
		}
	}
	noTemps(t, ts.dir)
}

func TestWriteReplaceIfVersion(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "one")
	v := ts.version("f")

	res, err := ts.write("f", "two", replaceAt(v))
	must(t, err)
	if res.Created || res.Previous != v || res.Version != SumString("two") {
		t.Fatalf("result = %+v", res)
	}
	_, err = ts.write("f", "three", replaceAt(v))
	wantErr(t, err, ReasonChanged, "write", "/ws/f")
	if ts.get("f") != "two" {
		t.Fatal("stale write landed")
	}
	must(t, os.Remove(ts.path("f")))
	_, err = ts.write("f", "four", replaceAt(res.Version))
	wantErr(t, err, ReasonGone, "write", "/ws/f")
	if _, err := os.Stat(ts.path("f")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a stale replace recreated the deleted file")
	}
}

func TestWriteUnconditional(t *testing.T) {
	ts := openTestStore(t)
	res, err := ts.write("a/b/c.txt", "made", anyway)
	must(t, err)
	if !res.Created || ts.get("a/b/c.txt") != "made" {
		t.Fatalf("create with parents: %+v", res)
	}
	res, err = ts.write("a/b/c.txt", "over", anyway)
	must(t, err)
	if res.Created || res.Previous != SumString("made") || ts.get("a/b/c.txt") != "over" {
		t.Fatalf("overwrite: %+v", res)
	}
	if fi, _ := os.Stat(ts.path("a/b")); fi.Mode().Perm() != 0o755 {
		t.Fatalf("created parent mode = %v", fi.Mode().Perm())
	}
}

func TestWriteKeepsModeAndSymlink(t *testing.T) {
	ts := openTestStore(t)
	ts.put("real.txt", "old")
	must(t, os.Chmod(ts.path("real.txt"), 0o640))
	must(t, os.Symlink("real.txt", ts.path("alias")))
	link, err := ts.Resolve("alias", "/ws/alias", "write")
	must(t, err)
	if link.Key != "real.txt" {
		t.Fatalf("alias key = %q", link.Key)
	}
	_, err = ts.WriteText(context.Background(), link, "new", replaceAt(SumString("old")), ToolWriter("agent"))
	must(t, err)
	if fi, err := os.Lstat(ts.path("alias")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced")
	}
	fi, err := os.Stat(ts.path("real.txt"))
	must(t, err)
	if ts.get("real.txt") != "new" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("target = %q mode %v", ts.get("real.txt"), fi.Mode().Perm())
	}
	noTemps(t, ts.dir)
}

// Writes and edits racing on one file at one observed version: exactly one
// lands, the others are stale, and the file holds the winner's bytes.
func TestConcurrentGuardedMutations(t *testing.T) {
	ts := openTestStore(t)
	for round := range 20 {
		ts.put("f", "base")
		v := ts.version("f")
		const n = 6
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				tg := ts.target("f")
				if i%2 == 0 {
					_, errs[i] = ts.WriteText(context.Background(), tg, "writer", replaceAt(v), ToolWriter("w"))
				} else {
					_, errs[i] = editText(context.Background(), ts.Store, tg, Edit{Old: "base", New: "edited"}, &v, ToolWriter("e"))
				}
			})
		}
		wg.Wait()
		wins := 0
		for i, err := range errs {
			switch CodeOf(err) {
			case "":
				wins++
				want := map[bool]string{true: "writer", false: "edited"}[i%2 == 0]
				if got := ts.get("f"); got != want {
					t.Fatalf("round %d: winner %d wrote %q, file has %q", round, i, want, got)
				}
			case CodeStaleVersion:
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners, want exactly 1", round, wins)
		}
	}
}

func TestWriteReturnedVersionMatchesDisk(t *testing.T) {
	ts := openTestStore(t)
	res, err := ts.write("f", "content\r\n", anyway)
	must(t, err)
	b, err := os.ReadFile(ts.path("f"))
	must(t, err)
	if res.Version != Sum(b) {
		t.Fatal("returned version is not the hash of the bytes on disk")
	}
}

// Cancellation is honoured up to the publish and no later: a call cancelled
// after its checks leaves the file and its directory as they were.
func TestCancelBeforePublish(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "one")
	v := ts.version("f")
	ctx, cancel := context.WithCancel(context.Background())
	ts.beforePublish = cancel
	_, err := ts.WriteText(ctx, ts.target("f"), "two", replaceAt(v), ToolWriter("a"))
	wantErr(t, err, ReasonAborted, "write", "")
	ctx, cancel = context.WithCancel(context.Background())
	ts.beforePublish = cancel
	_, err = editText(ctx, ts.Store, ts.target("f"), Edit{Old: "one", New: "two"}, &v, ToolWriter("a"))
	wantErr(t, err, ReasonAborted, "", "")
	if ts.get("f") != "one" {
		t.Fatal("a cancelled call changed the file")
	}
	noTemps(t, ts.dir)
}
