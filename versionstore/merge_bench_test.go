package versionstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mergeBenchFiles is the size of the benchmarked merge: 1,000 changed
// 4 KiB files, in directories of 100.
const mergeBenchFiles = 1000

func mergeBenchKey(i int) string { return fmt.Sprintf("d%02d/f%04d.txt", i/100, i) }

// mergeBenchTree fills dir with the workspace's side of the merge.
func mergeBenchTree(b *testing.B, dir string) {
	b.Helper()
	text := benchText(4 << 10)
	for i := range mergeBenchFiles {
		p := filepath.Join(dir, filepath.FromSlash(mergeBenchKey(i)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// mergeBenchChanges is the branch's side: every file changed.
func mergeBenchChanges() []BranchChange {
	text := strings.Replace(benchText(4<<10), "MARK-A", "MARK-B", 1)
	cs := make([]BranchChange, mergeBenchFiles)
	for i := range cs {
		cs[i] = BranchChange{Key: mergeBenchKey(i), Version: SumString(text), Data: []byte(text), Perm: 0o644}
	}
	return cs
}

// BenchmarkMerge1000 is a merge of 1,000 changed 4 KiB files (plan, keep
// the replaced bytes, apply each under its lock, durably), against, in the
// same run, the floor of writing the same files durably one by one (write
// a temp file, fsync, rename) and a plain copy of them (write, no sync).
func BenchmarkMerge1000(b *testing.B) {
	text := []byte(strings.Replace(benchText(4<<10), "MARK-A", "MARK-B", 1))
	b.Run("merge", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			dir := b.TempDir()
			mergeBenchTree(b, dir)
			s, err := Open(dir, filepath.Join(b.TempDir(), "index.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Checkpoint(context.Background(), "branch:m", nil); err != nil {
				b.Fatal(err)
			}
			changes := mergeBenchChanges()
			b.StartTimer()
			res, err := s.Merge(context.Background(), "m", "branch:m", changes, MergeOptions{})
			b.StopTimer()
			if err != nil || res.Applied != mergeBenchFiles {
				b.Fatalf("merge: %d applied, %d conflicts, %v", res.Applied, res.Conflicts, err)
			}
			s.Close()
			b.StartTimer()
		}
	})
	b.Run("fsync-each", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			dir := b.TempDir()
			mergeBenchTree(b, dir)
			b.StartTimer()
			for i := range mergeBenchFiles {
				bareWriteFsyncRename(b, filepath.Join(dir, fmt.Sprintf("d%02d", i/100)), text)
			}
		}
	})
	b.Run("cp", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			dir := b.TempDir()
			mergeBenchTree(b, dir)
			b.StartTimer()
			for i := range mergeBenchFiles {
				if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(mergeBenchKey(i))), text, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
