package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// The lock order of the store and the mount (versionstore's lockorder.go)
// holds while a directory and files are renamed back and forth, files are
// opened for writing, written and closed, and tools write and edit them and
// sync the workspace, all at once: no goroutine takes a lock while holding
// one ranked after it.
func TestLockOrderHoldsUnderRenamesOpensAndToolWrites(t *testing.T) {
	m := mountT(t)
	m.putBacking("d/f", "x\n")
	m.putBacking("d/g", "y\n")
	m.putBacking("h", "z\n")
	stop := versionstore.CheckLockOrder()
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	var wg sync.WaitGroup
	var done [4]atomic.Int64 // per kind of operation, those that went through
	run := func(kind int, op func(i int) bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				if op(i) {
					done[kind].Add(1)
				}
			}
		}()
	}
	mnt := func(p ...string) string { return filepath.Join(append([]string{m.mnt}, p...)...) }
	run(0, func(i int) bool { // the directory, d and e in turn
		return os.Rename(mnt("d"), mnt("e")) == nil || os.Rename(mnt("e"), mnt("d")) == nil
	})
	run(1, func(i int) bool { // a file, g and g2 in turn, wherever its directory is
		for _, d := range []string{"d", "e"} {
			if os.Rename(mnt(d, "g"), mnt(d, "g2")) == nil || os.Rename(mnt(d, "g2"), mnt(d, "g")) == nil {
				return true
			}
		}
		return false
	})
	run(2, func(i int) bool { // a shell's write
		for _, p := range []string{mnt("d", "f"), mnt("e", "f"), mnt("h")} {
			if f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				_, err = f.WriteString("more\n")
				return f.Close() == nil && err == nil
			}
		}
		return false
	})
	run(3, func(i int) bool { // a tool's write, now and then a sync
		if i%25 == 0 {
			_, err := m.store.Sync(context.Background(), nil)
			return err == nil
		}
		for _, rel := range []string{"h", "d/f", "e/f"} {
			tg, err := m.store.Resolve(rel, rel, "write")
			if err != nil {
				continue
			}
			if _, err := m.store.WriteText(context.Background(), tg, strings.Repeat("t", i), versionstore.Intent{}, versionstore.ToolWriter("agent")); err == nil {
				return true
			}
		}
		return false
	})
	wg.Wait()
	stopped = true
	if inv := stop(); len(inv) > 0 {
		t.Fatalf("%d lock order inversions, the first: %s", len(inv), inv[0])
	}
	for kind := range done {
		if done[kind].Load() == 0 {
			t.Fatalf("operation %d never went through: the race was not run", kind)
		}
	}
}
