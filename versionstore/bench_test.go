package versionstore

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var benchSizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}}

// benchText is n bytes of 64-byte lines with one "MARK-A" line in the middle.
func benchText(n int) string {
	line := strings.Repeat("abcdefghij", 6) + "xyz\n"
	lines := strings.Repeat(line, n/len(line)+1)
	half := n / 2 / len(line) * len(line)
	text := lines[:half] + "MARK-A\n" + lines[half:]
	return text[:n-1] + "\n"
}

func BenchmarkHash(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			buf := bytes.Repeat([]byte("x"), sz.n)
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				Sum(buf)
			}
		})
	}
}

// BenchmarkBaselinePublish is the floor a tool write stands on: write a temp
// file, fsync it, rename it over the target — no lock, no hash, no index.
func BenchmarkBaselinePublish(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			data := []byte(benchText(sz.n))
			dir := b.TempDir()
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				bareWriteFsyncRename(b, dir, data)
			}
		})
	}
}

func bareWriteFsyncRename(b *testing.B, dir string, data []byte) {
	tmp := filepath.Join(dir, ".f.tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	if err := os.Rename(tmp, filepath.Join(dir, "f")); err != nil {
		b.Fatal(err)
	}
}

func benchStore(b *testing.B, content string) (*Store, Target) {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := Open(dir, filepath.Join(b.TempDir(), "index.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	tg, err := s.Resolve("f", "/ws/f", "edit")
	if err != nil {
		b.Fatal(err)
	}
	return s, tg
}

// BenchmarkWrite is a guarded tool write (replace at the version last
// written): lock, snapshot and CAS check, publish with fsync, index commit.
func BenchmarkWrite(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			texts := [2]string{benchText(sz.n), strings.Replace(benchText(sz.n), "MARK-A", "MARK-B", 1)}
			s, tg := benchStore(b, texts[0])
			v := SumString(texts[0])
			b.SetBytes(int64(sz.n))
			i := 0
			for b.Loop() {
				i++
				res, err := s.WriteText(context.Background(), tg, texts[i%2], Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("bench"))
				if err != nil {
					b.Fatal(err)
				}
				v = res.Version
			}
		})
	}
}

// BenchmarkEdit is a guarded tool edit flipping one marker.
func BenchmarkEdit(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			text := benchText(sz.n)
			s, tg := benchStore(b, text)
			v := SumString(text)
			b.SetBytes(int64(sz.n))
			edits := [2]Edit{{Old: "MARK-A", New: "MARK-B"}, {Old: "MARK-B", New: "MARK-A"}}
			i := 0
			for b.Loop() {
				res, err := editText(context.Background(), s, tg, edits[i%2], &v, ToolWriter("bench"))
				if err != nil {
					b.Fatal(err)
				}
				v = res.Version
				i++
			}
		})
	}
}

// BenchmarkRead streams and hashes the whole file, as the read tool does.
func BenchmarkRead(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			text := benchText(sz.n)
			s, tg := benchStore(b, text)
			b.SetBytes(int64(sz.n))
			for b.Loop() {
				if _, err := s.Read(context.Background(), tg, func([]byte, bool) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEditVsBaseline interleaves a 4 KiB guarded edit with the bare
// write+fsync+rename floor, on the same filesystem, and reports the ratio of
// their mean times: the goal is at most 1.5.
func BenchmarkEditVsBaseline(b *testing.B) {
	text := benchText(4 << 10)
	s, tg := benchStore(b, text)
	v := SumString(text)
	dir := b.TempDir()
	data := []byte(text)
	edits := [2]Edit{{Old: "MARK-A", New: "MARK-B"}, {Old: "MARK-B", New: "MARK-A"}}
	var tEdit, tBase time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		bareWriteFsyncRename(b, dir, data)
		t1 := time.Now()
		res, err := editText(context.Background(), s, tg, edits[i%2], &v, ToolWriter("bench"))
		if err != nil {
			b.Fatal(err)
		}
		tEdit += time.Since(t1)
		tBase += t1.Sub(t0)
		v = res.Version
		i++
	}
	b.ReportMetric(float64(tBase.Microseconds())/float64(i), "baseline-µs/op")
	b.ReportMetric(float64(tEdit.Microseconds())/float64(i), "edit-µs/op")
	b.ReportMetric(float64(tEdit)/float64(tBase), "edit/baseline")
}

// BenchmarkCheckpointRewind times a checkpoint of a workspace of 1,000
// indexed files (the first after they were written, which hashes them, and
// the next) and a rewind after every one of them changed through the
// mount's commit path (bytes kept before and after each change): the
// rewind restores 1,000 files.
func BenchmarkCheckpointRewind(b *testing.B) {
	const n = 1000
	for b.Loop() {
		dir, state := b.TempDir(), b.TempDir()
		s, err := Open(dir, filepath.Join(state, "index.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		w := Writer{Kind: WriterMount, Pid: 1}
		change := func(i int, content string) {
			key := fmt.Sprintf("d%02d/f%04d.txt", i%50, i)
			unlock := s.locks.Lock(key)
			s.mount.Preserve(key)
			os.MkdirAll(filepath.Join(dir, filepath.Dir(key)), 0o755)
			if err := os.WriteFile(filepath.Join(dir, key), []byte(content), 0o644); err != nil {
				b.Fatal(err)
			}
			s.mount.Refresh(key, w)
			unlock()
		}
		for i := range n {
			change(i, benchText(2048)+strconv.Itoa(i)+"\n")
		}
		// A file recorded within the racy window of its last change is
		// hashed by the next checkpoint, and re-stamped; after that a
		// checkpoint costs an lstat per indexed file.
		time.Sleep(racyWindow + 100*time.Millisecond)
		t0 := time.Now()
		if _, err := s.Checkpoint(context.Background(), "first", nil); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(t0).Microseconds()), "first-checkpoint-µs")
		t0 = time.Now()
		if _, err := s.Checkpoint(context.Background(), "bench", nil); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(t0).Microseconds()), "checkpoint-µs")
		for i := range n {
			change(i, "changed "+strconv.Itoa(i)+"\n")
		}
		t0 = time.Now()
		res, err := s.Rewind(context.Background(), "bench", RewindOptions{Writer: Writer{Kind: WriterRestore}})
		if err != nil || res.Conflicts != 0 || len(res.Actions) != n {
			b.Fatalf("rewind: %d actions, %d conflicts, %v", len(res.Actions), res.Conflicts, err)
		}
		b.ReportMetric(float64(time.Since(t0).Milliseconds()), "rewind-1000-ms")
		s.Close()
	}
}

// BenchmarkBaselineVsGit times the first checkpoint of a 20,000-file tree
// (500 directories, 1–3 KiB files) — every file read, hashed and its bytes
// kept — against `git add -A && git write-tree` of the same tree, which
// reads, hashes, compresses and stores every file too, in the same run.
// Goal: ≤ 1.0×.
func BenchmarkBaselineVsGit(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("needs git")
	}
	const files, dirs = 20000, 500
	for b.Loop() {
		dsh, gitDir, state := b.TempDir(), b.TempDir(), b.TempDir()
		for _, root := range []string{dsh, gitDir} {
			writeBenchTree(b, root, files, dirs)
		}
		git := func(args ...string) {
			cmd := exec.Command("git", append([]string{"-C", gitDir, "-c", "gc.auto=0"}, args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		git("init", "-q")
		t0 := time.Now()
		git("add", "-A")
		git("write-tree")
		gitTime := time.Since(t0)

		s, err := Open(dsh, filepath.Join(state, "index.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		cp, err := s.Checkpoint(context.Background(), "first", nil)
		dshTime := time.Since(t0)
		if err != nil || cp.Files != files {
			b.Fatalf("checkpoint %+v, %v", cp, err)
		}
		kept := s.retain.kept()
		s.Close()
		b.ReportMetric(float64(kept)/(1<<20), "kept-MiB")
		b.ReportMetric(float64(dshTime.Milliseconds()), "checkpoint-ms")
		b.ReportMetric(float64(gitTime.Milliseconds()), "git-add-write-tree-ms")
		b.ReportMetric(dshTime.Seconds()/gitTime.Seconds(), "checkpoint-x")
		b.ReportMetric(float64(dirSize(b, state))/(1<<20), "state-files-MiB")
		b.ReportMetric(float64(dirSize(b, filepath.Join(gitDir, ".git")))/(1<<20), "git-MiB")
	}
}

// writeBenchTree writes n files of 1–3 KiB of text, each different, over
// dirs directories under root.
func writeBenchTree(b *testing.B, root string, n, dirs int) {
	b.Helper()
	line := strings.Repeat("the quick brown fox jumps over the lazy dog ", 2) + "\n"
	for d := range dirs {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("d%03d", d)), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		size := 1024 + (i*7919)%2048
		body := strconv.Itoa(i) + "\n" + strings.Repeat(line, size/len(line)+1)[:size]
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("d%03d/f%05d.txt", i%dirs, i)), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func dirSize(b *testing.B, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
