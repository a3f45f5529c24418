// Regression tests: each comment says what used to go wrong.

package versionstore

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A process writing straight into the backing directory does not take the
// store's lock. A write of its that lands after the store's check but
// before the rename must make the tool write stale, not vanish.
func TestOutsideWriteBeforeRenameIsNotLost(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "original\n")
	v := ts.version("f")
	ts.beforePublish = func() { ts.put("f", "external edit\n") }
	_, err := ts.write("f", "agent\n", replaceAt(v))
	wantErr(t, err, ReasonChanged, "write", "/ws/f")
	_, err = ts.edit("f", Edit{Old: "external", New: "agent"}, nil)
	wantErr(t, err, ReasonChanged, "", "/ws/f")
	if got := ts.get("f"); got != "external edit\n" {
		t.Fatalf("file = %q: the outside write was replaced", got)
	}
	noTemps(t, ts.dir)
}

// A created file's recorded fingerprint is the one later stats see, so the
// next access trusts it instead of rehashing: a small tool publish records
// its temp file's before the link, and its settling the one the link left.
func TestCreateFingerprintMatchesFile(t *testing.T) {
	ts := openTestStore(t)
	_, err := ts.write("new", "bytes", createOnly)
	must(t, err)
	ts.waitSynced()
	ts.waitRecordGone("new")
	fi, err := os.Stat(ts.path("new"))
	must(t, err)
	var r record
	must(t, ts.db.View(func(tx *bolt.Tx) (err error) { r, _, err = getRecord(tx, "new"); return err }))
	if r.FP != fingerprintOf(fi) {
		t.Fatalf("recorded %+v, file has %+v", r.FP, fingerprintOf(fi))
	}
}

// A directory swapped in during an edit is reported with the edit's verb.
func TestPublishNotRegularUsesVerb(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "x")
	ts.beforePublish = func() { must(t, os.Remove(ts.path("f"))); must(t, os.Mkdir(ts.path("f"), 0o755)) }
	_, err := ts.edit("f", Edit{Old: "x", New: "y"}, nil)
	wantErr(t, err, ReasonNotRegular, "", "/ws/f")
}

// A dangling symlink, absolute or relative, reads as absent; writing
// through it is refused and the link kept.
func TestDanglingSymlinks(t *testing.T) {
	ts := openTestStore(t)
	must(t, os.Symlink(filepath.Join(ts.dir, "missing.txt"), ts.path("abs")))
	must(t, os.Symlink("missing.txt", ts.path("rel")))
	for _, name := range []string{"abs", "rel"} {
		_, _, err := ts.readAll(name)
		wantErr(t, err, ReasonMissing, "read", "/ws/"+name)
		_, err = ts.write(name, "x", createOnly)
		wantErr(t, err, ReasonNotRegular, "write", "/ws/"+name)
		if fi, err := os.Lstat(ts.path(name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s: link not kept", name)
		}
	}
	// A dangling link to a directory is not followed to create it: the
	// key would not be the path the bytes land at. The link is where a
	// directory of the key should be: a parent that is not a directory.
	must(t, os.Symlink("realdir", ts.path("dlink")))
	_, err := ts.write("dlink/sub/f.txt", "x", anyway)
	wantErr(t, err, ReasonParentNotDir, "write", "/ws/dlink/sub/f.txt", syscall.ENOTDIR)
	if _, err := os.Stat(ts.path("realdir")); !os.IsNotExist(err) {
		t.Fatal("the write created directories through a dangling link")
	}
}

// A call cancelled while it waits for the file's lock changes nothing, not
// even the parent directories.
func TestCancelWhileWaitingForLock(t *testing.T) {
	ts := openTestStore(t)
	tg, err := ts.Resolve("a/b/f", "/ws/a/b/f", "write")
	must(t, err)
	unlock := ts.locks.Lock(tg.Key)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := ts.WriteText(ctx, tg, "x", anyway, ToolWriter("a"))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	unlock()
	wantErr(t, <-done, ReasonAborted, "write", "")
	if _, err := os.Stat(ts.path("a")); !os.IsNotExist(err) {
		t.Fatal("a cancelled write created directories")
	}
}

// An index with damaged pages (not just garbage bbolt refuses to open) is
// moved aside without crashing or leaking the checker's goroutine.
func TestDamagedPagesMovedAside(t *testing.T) {
	ts := openTestStore(t)
	for i := range 200 {
		_, err := ts.write("d/f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)), strings.Repeat("y", i), anyway)
		must(t, err)
	}
	// Crash (no clean mark), then scribble over the pages after the meta pages.
	close(ts.stopSync)
	ts.syncDone.Wait()
	must(t, ts.db.Close())
	must(t, ts.root.Close())
	f, err := os.OpenFile(ts.index, os.O_RDWR, 0)
	must(t, err)
	page := int64(os.Getpagesize())
	junk := []byte(strings.Repeat("\xff\x00\x13", int(page)))
	for off := 2 * page; off < 12*page; off += page {
		f.WriteAt(junk[:page], off)
	}
	f.Close()
	before := runtime.NumGoroutine()
	ts.open()
	if aside, _ := filepath.Glob(ts.index + ".damaged-*"); len(aside) != 1 {
		t.Fatalf("damaged index not moved aside: %v", aside)
	}
	time.Sleep(50 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before+1 { // the store's own sync goroutine
		t.Fatalf("goroutines %d → %d: the checker leaked", before, after)
	}
	if v := ts.version("d/faa"); v.IsZero() {
		t.Fatal("no version after rebuild")
	}
}

// A tool read that found the index behind the file recorded the bytes as an
// outside change at once, without first committing the mount's batch. A
// shell's write whose commit the mount had just queued, during the read,
// was then attributed to "external".
func TestReadDoesNotTakeAMountCommitForAnOutsideChange(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "one\n")
	ts.version("f")
	ts.markWriting("f") // a shell writes through the mount
	if err := os.WriteFile(ts.path("f"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := Writer{Kind: WriterMount, Pid: 42, Comm: "sh"}
	committed := false
	_, err := ts.Read(context.Background(), ts.target("f"), func([]byte, bool) error {
		if !committed { // the shell closes the file during the read
			committed = true
			if _, err := ts.mount.Refresh("f", sh); err != nil {
				t.Error(err)
			}
			ts.doneWriting("f")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ts.History("f")
	if len(h) == 0 || h[0].Version != SumString("two\n") || h[0].Writer != sh {
		t.Fatalf("history %+v: the shell's write is not attributed to it", h)
	}
}
