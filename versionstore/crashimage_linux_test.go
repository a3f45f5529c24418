package versionstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The crash-image test: the store's state directory sits on a FUSE
// loopback that records every write, truncate and sync of the index file.
// After a workload, the file as the disk could hold it after a power cut at
// any point is rebuilt — everything up to the last sync, and of the writes
// since none, all, or any of their 512-byte sectors — and the store opened
// on it: it must open within a deadline without panic, on a sound index,
// with every edit and checkpoint acknowledged before the cut in it, and
// every such checkpoint must rewind.

// ack is a result the store reported: an edit's version or a checkpoint,
// acknowledged when the log held pos operations.
type ack struct {
	pos        int
	key        string
	version    Version
	checkpoint string
}

// crashWorkload runs a seeded mix of tool writes and edits, the mount's
// versions (served as history) and checkpoints, and returns what was
// acknowledged when.
func crashWorkload(t *testing.T, s *Store, rec *diskRecorder, dir string, seed uint64, steps int) []ack {
	rng := rand.New(rand.NewPCG(seed, 1))
	ctx := context.Background()
	var acks []ack
	for i := range steps {
		key := fmt.Sprintf("f%d.txt", rng.IntN(6))
		if i < 6 { // every file is created by a tool, so a rewind knows its start
			key = fmt.Sprintf("f%d.txt", i)
		}
		content := fmt.Sprintf("step %d seed %d\n", i, seed)
		op := rng.IntN(8)
		if i < 6 {
			op = 7 // a tool write
		}
		switch {
		case op == 0:
			cp, err := s.Checkpoint(ctx, "", nil)
			must(t, err)
			acks = append(acks, ack{pos: rec.len(), checkpoint: cp.Name})
		case op == 3: // concurrent tool writes share commits
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := range 3 {
				wg.Go(func() {
					key := fmt.Sprintf("f%d.txt", (i+w)%6)
					res, err := s.WriteText(ctx, Target{Key: key, Display: key}, fmt.Sprint(content, w), Intent{}, ToolWriter("a"))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acks = append(acks, ack{pos: rec.len(), key: key, version: res.Version})
					mu.Unlock()
				})
			}
			wg.Wait()
		case op == 4:
			res, err := s.Update(ctx, Target{Key: key, Display: key}, nil, func(cur []byte) ([]byte, error) {
				return append(slices.Clone(cur), content...), nil
			}, ToolWriter("a"))
			must(t, err)
			acks = append(acks, ack{pos: rec.len(), key: key, version: res.Version})
		case op <= 2:
			unlock := s.locks.Lock(key)
			must(t, os.WriteFile(filepath.Join(dir, key), []byte(content), 0o644))
			_, err := s.mount.Refresh(key, Writer{Kind: WriterMount, Pid: 1})
			unlock()
			must(t, err)
			if _, err := s.History(key); err != nil { // served: durable now
				t.Fatal(err)
			}
			acks = append(acks, ack{pos: rec.len(), key: key, version: SumString(content)})
		default:
			res, err := s.WriteText(ctx, Target{Key: key, Display: key}, content, Intent{}, ToolWriter("a"))
			must(t, err)
			acks = append(acks, ack{pos: rec.len(), key: key, version: res.Version})
		}
	}
	slices.SortStableFunc(acks, func(a, b ack) int { return a.pos - b.pos })
	return acks
}

// checkImage opens a store on img and checks what acks promise.
func checkImage(t *testing.T, dir string, img []byte, acks []ack, cut, firstSync int) (edits, checkpoints int) {
	t.Helper()
	state := t.TempDir()
	index := filepath.Join(state, "index.db")
	must(t, os.WriteFile(index, img, 0o600))
	var s *Store
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		var err error
		if s, err = Open(dir, index, Options{}); err != nil {
			panic(err)
		}
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Fatalf("cut at %d: open: %v", cut, p)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("cut at %d: open did not return within 30 s", cut)
	}
	defer s.Close()
	// Before its first sync the file was never a whole index: starting a
	// new one is right then. After it, the cut must leave a sound one.
	if aside, _ := filepath.Glob(index + ".damaged-*"); len(aside) > 0 && cut > firstSync {
		t.Fatalf("cut at %d: the index was damaged", cut)
	}
	for _, a := range acks {
		if a.pos > cut {
			break
		}
		if a.checkpoint != "" {
			res, err := s.Rewind(context.Background(), a.checkpoint, RewindOptions{DryRun: true})
			if err != nil {
				t.Fatalf("cut at %d: acknowledged checkpoint %s (at %d): %v", cut, a.checkpoint, a.pos, err)
			}
			if res.Conflicts != 0 {
				t.Fatalf("cut at %d: checkpoint %s does not rewind: %+v", cut, a.checkpoint, res)
			}
			checkpoints++
			continue
		}
		h, err := s.History(a.key)
		must(t, err)
		if !slices.ContainsFunc(h, func(e HistoryEntry) bool { return e.Version == a.version }) {
			t.Fatalf("cut at %d: acknowledged version %s of %s (at %d) missing from history", cut, a.version.Short(), a.key, a.pos)
		}
		edits++
	}
	return edits, checkpoints
}

// crashSeeds is how many workloads the test replays (DSHFS_CRASH_SEEDS
// for a longer run).
func crashSeeds() int {
	if n, err := strconv.Atoi(os.Getenv("DSHFS_CRASH_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 2
}

func TestCrashImages(t *testing.T) {
	var totals crashTotals
	for seed := range uint64(crashSeeds()) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			mnt, rec := mountRecorder(t)
			dir := t.TempDir()
			s, err := Open(dir, filepath.Join(mnt, "index.db"), Options{})
			must(t, err)
			t.Cleanup(func() { s.Close() }) // before the unmount
			acks := crashWorkload(t, s, rec, dir, seed, 40)
			must(t, s.Close())
			rec.load(t)
			for i := range acks {
				acks[i].pos = rec.opsBefore(acks[i].pos)
			}
			rng := rand.New(rand.NewPCG(seed, 2))
			n := len(rec.ops)
			firstSync := slices.IndexFunc(rec.ops, func(op diskOp) bool { return op.sync })
			cuts := []int{n, 1, firstSync, firstSync + 1}
			for range 12 {
				cuts = append(cuts, acks[rng.IntN(len(acks))].pos, rng.IntN(n+1))
			}
			var edits, checkpoints int
			for _, cut := range cuts {
				// Nothing since the last sync reached the disk.
				e, c := checkImage(t, dir, rec.image(cut, func(diskOp) [][2]int64 { return nil }), acks, cut, firstSync)
				// Some of it did, in pieces.
				e2, c2 := checkImage(t, dir, rec.image(cut, func(op diskOp) [][2]int64 { return tornSpans(rng, op) }), acks, cut, firstSync)
				edits, checkpoints = edits+e+e2, checkpoints+c+c2
			}
			t.Logf("%d index writes and syncs, %d images (cut, and cut then torn): %d acknowledged edits and %d checkpoints found, none missing",
				n, 2*len(cuts), edits, checkpoints)
			totals.Add(2*len(cuts), edits, checkpoints)
		})
	}
	t.Logf("%d workloads, %d images opened without a panic or a hang; %d acknowledged edits and %d checkpoints checked, none lost",
		crashSeeds(), totals.images, totals.edits, totals.checkpoints)
}

// crashTotals sums what the workloads checked.
type crashTotals struct{ images, edits, checkpoints int }

func (c *crashTotals) Add(images, edits, checkpoints int) {
	c.images, c.edits, c.checkpoints = c.images+images, c.edits+edits, c.checkpoints+checkpoints
}

// tornSpans picks which 512-byte sectors of an unsynced write reached the
// disk: none, all, or a random subset.
func tornSpans(rng *rand.Rand, op diskOp) [][2]int64 {
	n := int64(len(op.data))
	switch rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return [][2]int64{{0, n}}
	}
	var spans [][2]int64
	for from := int64(0); from < n; from += 512 {
		if rng.IntN(2) == 0 {
			spans = append(spans, [2]int64{from, min(from+512, n)})
		}
	}
	return spans
}
