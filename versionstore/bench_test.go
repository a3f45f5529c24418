package versionstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
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
				res, err := s.EditText(context.Background(), tg, edits[i%2], &v, ToolWriter("bench"))
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
				if _, err := s.ReadText(context.Background(), tg, func(string) {}); err != nil {
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
		res, err := s.EditText(context.Background(), tg, edits[i%2], &v, ToolWriter("bench"))
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
			s.Preserve(key)
			os.MkdirAll(filepath.Join(dir, filepath.Dir(key)), 0o755)
			if err := os.WriteFile(filepath.Join(dir, key), []byte(content), 0o644); err != nil {
				b.Fatal(err)
			}
			s.Refresh(key, w)
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
