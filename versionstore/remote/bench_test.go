package remote

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkCatchUp times shipping 10,000 versions that queued while the
// remote was away: the replicator starts with all of them in the journal.
func BenchmarkCatchUp(b *testing.B) {
	const versions = 10000
	for range b.N {
		b.StopTimer()
		fx := newFixture(b)
		for i := range versions {
			fx.write(fmt.Sprintf("d%d/f%05d.go", i%50, i), strings.Repeat(fmt.Sprintf("// line of file %d\n", i), 60))
		}
		bucket := fx.bucket()
		b.StartTimer()
		start := time.Now()
		r := fx.start(bucket, "w1")
		fx.caughtUp(r)
		took := time.Since(start)
		b.StopTimer()
		if err := r.Close(time.Minute); err != nil {
			b.Fatal(err)
		}
		c := bucket.Counts()
		b.ReportMetric(took.Seconds(), "catch-up-s")
		b.ReportMetric(float64(c.Puts), "PUTs")
		b.ReportMetric(float64(c.PutBytes)/(1<<20), "MiB-sent")
	}
}

// BenchmarkLag measures, during a steady stream of edits (one every 20 ms),
// how long each journal entry waits before the bucket holds it.
func BenchmarkLag(b *testing.B) {
	const edits = 300
	for range b.N {
		b.StopTimer()
		fx := newFixture(b)
		// The daemon's own interval, not the tests' quicker one.
		r, err := Start(context.Background(), fx.store, fx.bucket(), Options{Writer: "w1"})
		if err != nil {
			b.Fatal(err)
		}
		written := make([]time.Time, edits+1)
		shipped := make([]time.Time, edits+1)
		done := make(chan struct{})
		go func() { // notes when each entry is in the bucket
			defer close(done)
			for seen := uint64(0); seen < edits; time.Sleep(2 * time.Millisecond) {
				for now, s := time.Now(), r.Status().ShippedSeq; seen < s && seen < edits; seen++ {
					shipped[seen+1] = now
				}
			}
		}()
		b.StartTimer()
		for i := 1; i <= edits; i++ {
			fx.write("main.go", fmt.Sprintf("package main // edit %d\n", i))
			written[i] = time.Now()
			time.Sleep(20 * time.Millisecond)
		}
		<-done
		b.StopTimer()
		if err := r.Close(time.Minute); err != nil {
			b.Fatal(err)
		}
		lags := make([]float64, 0, edits)
		for i := 1; i <= edits; i++ {
			lags = append(lags, float64(shipped[i].Sub(written[i]).Milliseconds()))
		}
		slices.Sort(lags)
		b.ReportMetric(lags[len(lags)/2], "lag-p50-ms")
		b.ReportMetric(lags[len(lags)*99/100], "lag-p99-ms")
	}
}
