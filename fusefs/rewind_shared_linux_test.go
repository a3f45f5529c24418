package fusefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// nobodyLoop runs op over and over as nobody (see asNobody), on a thread
// of its own, from now until the returned stop is called, at most max
// times and for at most limit. stop reports how many times op succeeded,
// and the error that ended the loop early, if one did.
func nobodyLoop(t *testing.T, max int, limit time.Duration, op func() error) (stop func() (int, error)) {
	t.Helper()
	done := make(chan struct{})
	started := make(chan error, 1)
	type result struct {
		n   int
		err error
	}
	ended := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := becomeNobody(); err != nil {
			started <- err
			return
		}
		started <- nil
		var r result
		for deadline := time.Now().Add(limit); r.n < max && time.Now().Before(deadline); r.n++ {
			select {
			case <-done:
				ended <- r
				return
			default:
			}
			if r.err = op(); r.err != nil {
				break
			}
		}
		<-done
		ended <- r
	}()
	if err := <-started; err != nil {
		t.Fatalf("change the thread's credentials: %v", err)
	}
	return func() (int, error) {
		close(done)
		r := <-ended
		return r.n, r.err
	}
}

// A rewind run by root while nobody, through the mount, swaps the real
// directory pub/att/sub with pub/att/link, a symlink to root's victim/
// (which nobody cannot write), with RENAME_EXCHANGE as fast as the mount
// goes. The rewind restores, recreates and removes 200 files of nobody's
// under pub/att/sub. It used to check the directory by path and then act
// by path, so a recreate could put nobody's bytes, as root's file with
// nobody's mode, into victim/ (aimed at .git/hooks: code run as root), and
// a removal could remove a file of root's. Nothing in victim/ may change,
// and no temp file may be left anywhere.
func TestRewindUnderNobodysExchangeRace(t *testing.T) {
	m := mountShared(t)
	const n = 200
	name := func(i int) string { return fmt.Sprintf("f%03d", i) }
	sub, link := filepath.Join(m.mnt, "pub/att/sub"), filepath.Join(m.mnt, "pub/att/link")
	var err error
	asNobody(t, func() {
		if err = os.MkdirAll(sub, 0o755); err != nil {
			return
		}
		for i := 0; i < n && err == nil; i++ {
			err = os.WriteFile(filepath.Join(sub, name(i)), []byte(fmt.Sprintf("#!/bin/sh\necho nobody %d\n", i)), 0o755)
		}
		if err == nil {
			err = os.Symlink("../../victim", link)
		}
	})
	if err != nil {
		t.Fatalf("nobody makes pub/att: %v", err)
	}
	if err := os.Mkdir(filepath.Join(m.backing, "victim"), 0o755); err != nil {
		t.Fatal(err)
	}
	victim := map[string]rootsEntry{"victim": m.rootsEntryAt("victim")}
	for i := range n {
		if i%3 != 1 { // the recreated ones have no namesake in victim/
			victim["victim/"+name(i)] = m.putSecret("victim/" + name(i))
		}
	}
	ctx := context.Background()
	if _, err := m.store.Checkpoint(ctx, "cp", nil); err != nil {
		t.Fatal(err)
	}
	asNobody(t, func() {
		for i := 0; i < n && err == nil; i++ {
			p := filepath.Join(sub, name(i))
			switch i % 3 {
			case 0: // changed: restored
				err = os.WriteFile(p, []byte("changed\n"), 0o755)
			case 1: // deleted: recreated
				err = os.Remove(p)
			case 2: // moved to a new name: removed there, recreated here
				err = os.Rename(p, filepath.Join(sub, "new"+name(i)))
			}
		}
	})
	if err != nil {
		t.Fatalf("nobody changes pub/att/sub: %v", err)
	}
	m.waitUnmarked()

	stop := nobodyLoop(t, 1_000_000, 20*time.Second, func() error {
		return unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
	})
	res, err := m.store.Rewind(ctx, "cp", versionstore.RewindOptions{Writer: versionstore.ToolWriter("root")})
	swaps, serr := stop()
	if err != nil {
		t.Fatal(err)
	}
	if swaps == 0 {
		t.Fatalf("no RENAME_EXCHANGE through the mount: %v", serr)
	}
	t.Logf("%d swaps during the rewind (%v): %d actions, %d conflicts", swaps, serr, len(res.Actions), res.Conflicts)
	for rel, e := range victim {
		if rel != "victim" {
			m.wantIntact(rel, e)
		}
	}
	names, err := os.ReadDir(filepath.Join(m.backing, "victim"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range names {
		if _, ok := victim["victim/"+d.Name()]; !ok {
			t.Errorf("victim/%s appeared in root's directory", d.Name())
		}
	}
	filepath.WalkDir(m.backing, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".dshfs-") {
			t.Errorf("temp file left behind: %s", p)
		}
		return nil
	})
}
