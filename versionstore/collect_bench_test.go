package versionstore

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkEditDuringCollection is a tool edit's latency, p50 and p99,
// with no collection running and while one drops 100,000 objects: in one
// transaction (what a collection did) and in transactions of collectBatch
// objects. Run it once: -bench EditDuringCollection -benchtime 1x.
func BenchmarkEditDuringCollection(b *testing.B) {
	for _, mode := range []struct {
		name  string
		batch int
	}{{"one_transaction", math.MaxInt}, {"batches", collectBatch}} {
		b.Run(mode.name, func(b *testing.B) {
			for b.Loop() {
				idle, during, took := editsDuringCollection(b, mode.batch, 100_000)
				p50i, p99i := percentile(idle, 50), percentile(idle, 99)
				p50g, p99g := percentile(during, 50), percentile(during, 99)
				b.ReportMetric(ms(p50i), "p50_idle_ms")
				b.ReportMetric(ms(p99i), "p99_idle_ms")
				b.ReportMetric(ms(p50g), "p50_gc_ms")
				b.ReportMetric(ms(p99g), "p99_gc_ms")
				b.ReportMetric(float64(p99g)/float64(p99i), "p99_ratio")
				b.ReportMetric(float64(len(during)), "edits_during_gc")
				b.ReportMetric(ms(took), "gc_ms")
			}
		})
	}
}

// editsDuringCollection times tool edits of one file: 300 with no
// collection, then as many as run while a collection drops n objects
// past the retention age, batch of them a transaction.
func editsDuringCollection(b *testing.B, batch, n int) (idle, during []time.Duration, took time.Duration) {
	b.StopTimer()
	dir := b.TempDir()
	text := benchText(4 << 10)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := Open(dir, filepath.Join(b.TempDir(), "index.db"), Options{RetainAge: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.retain.batch = batch
	tg, err := s.Resolve("f", "/ws/f", "edit")
	if err != nil {
		b.Fatal(err)
	}
	plantObjects(b, s, n, time.Now().Add(-2*time.Hour))
	v := SumString(text)
	edits := [2]Edit{{Old: "MARK-A", New: "MARK-B"}, {Old: "MARK-B", New: "MARK-A"}}
	i := 0
	edit := func() time.Duration {
		t0 := time.Now()
		res, err := editText(context.Background(), s, tg, edits[i%2], &v, ToolWriter("bench"))
		if err != nil {
			b.Fatal(err)
		}
		v, i = res.Version, i+1
		return time.Since(t0)
	}
	b.StartTimer()
	for range 300 {
		idle = append(idle, edit())
	}
	done := make(chan GCResult, 1)
	t0 := time.Now()
	go func() {
		res, err := s.GC(nil)
		if err != nil {
			b.Error(err)
		}
		done <- res
	}()
	for {
		select {
		case res := <-done:
			if res.Removed != n {
				b.Fatalf("collection dropped %d objects, want %d", res.Removed, n)
			}
			return idle, during, time.Since(t0)
		default:
			during = append(during, edit())
		}
	}
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
