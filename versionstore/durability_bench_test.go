package versionstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkEditDurability interleaves, round by round on the same
// filesystem, a 4 KiB guarded edit on stores of five kinds:
//
//   - "nosync": the edit before commits were durable: the file fsynced and
//     renamed, its directory not synced, the index committed without fsync
//     (and synced once a second);
//   - "synced": every sync before the acknowledgement: the file's, the
//     directory's, the index's (SyncPublishes);
//   - "journal": the nosync edit followed by a 128-byte append to a file
//     and its fdatasync: what a checksummed append-only journal in front of
//     an unsynced index would cost;
//   - "settled": now: the index's commit, which holds the bytes, synced
//     before the acknowledgement, the file and directory after (settle.go),
//     the settling waited out between edits, untimed, as a model's edits
//     are seconds apart;
//   - "back-to-back": now, the next edit of the file started at once, so it
//     may first wait for the previous one's file to sync.
//
// It reports each one's median and the ratios of the medians to nosync,
// per round (min and max: the spread is the noise) and overall: the goal is
// settled ≤ 1.3× nosync.
func BenchmarkEditDurability(b *testing.B) {
	const perRound = 50
	kinds := []string{"nosync", "synced", "journal", "settled", "back-to-back"}
	edit := map[string]func() time.Duration{}
	for _, k := range kinds {
		edit[k] = durabilityEditor(b, k)
	}
	b.Cleanup(func() { benchNoDirSync = false })
	interleave(b, perRound, kinds, edit, func(k string) { benchNoDirSync = k == "nosync" || k == "journal" })
}

// durabilityEditor returns a function doing one timed 4 KiB edit on a store
// of the given kind (see BenchmarkEditDurability).
func durabilityEditor(b *testing.B, kind string) func() time.Duration {
	text := benchText(4 << 10)
	s, tg := benchStore(b, text)
	s.db.NoSync = kind == "nosync" || kind == "journal"
	s.syncPublishes = kind == "nosync" || kind == "journal" || kind == "synced"
	var jf *os.File
	if kind == "journal" {
		var err error
		if jf, err = os.OpenFile(filepath.Join(b.TempDir(), "journal"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { jf.Close() })
	}
	rec := make([]byte, 128)
	v := SumString(text)
	edits := [2]Edit{{Old: "MARK-A", New: "MARK-B"}, {Old: "MARK-B", New: "MARK-A"}}
	i := 0
	return func() time.Duration {
		if kind == "settled" {
			s.settleWhere(everything, true) // synced and its record dropped, as the settler does
		}
		t0 := time.Now()
		res, err := editText(context.Background(), s, tg, edits[i%2], &v, ToolWriter("bench"))
		if err != nil {
			b.Fatal(err)
		}
		if jf != nil {
			if _, err := jf.Write(rec); err != nil {
				b.Fatal(err)
			}
			if err := datasync(jf); err != nil {
				b.Fatal(err)
			}
		}
		v = res.Version
		i++
		return time.Since(t0)
	}
}

// interleave runs, each round, perRound edits of every kind in turn (set
// readies a kind's edit), and reports each kind's median and the ratios of
// the medians to the first kind's, overall and per round (min and max: the
// spread is the noise).
func interleave(b *testing.B, perRound int, kinds []string, edit map[string]func() time.Duration, set func(kind string)) {
	base := kinds[0]
	all := map[string][]time.Duration{}
	ratios := map[string][]float64{}
	for b.Loop() {
		round := map[string][]time.Duration{}
		for range perRound {
			for _, k := range kinds {
				set(k)
				round[k] = append(round[k], edit[k]())
			}
		}
		for _, k := range kinds {
			all[k] = append(all[k], round[k]...)
			ratios[k] = append(ratios[k], float64(median(round[k]))/float64(median(round[base])))
		}
	}
	for _, k := range kinds {
		b.ReportMetric(float64(median(all[k]).Microseconds()), k+"-p50-µs")
		if k == base {
			continue
		}
		b.ReportMetric(float64(median(all[k]))/float64(median(all[base])), k+"/"+base)
		slices.Sort(ratios[k])
		b.ReportMetric(ratios[k][0], k+"-min-round")
		b.ReportMetric(ratios[k][len(ratios[k])-1], k+"-max-round")
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkConcurrentEdits runs n tool edits at once, each on a file of its
// own, on a durable store: the group committer lets them share their index
// syncs, so the time per edit falls as n grows.
func BenchmarkConcurrentEdits(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("writers=%d", n), func(b *testing.B) {
			text := benchText(4 << 10)
			dir := b.TempDir()
			for w := range n {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", w)), []byte(text), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			s, err := Open(dir, filepath.Join(b.TempDir(), "index.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			vs := make([]Version, n)
			for w := range vs {
				vs[w] = SumString(text)
			}
			edits := [2]Edit{{Old: "MARK-A", New: "MARK-B"}, {Old: "MARK-B", New: "MARK-A"}}
			i := 0
			for b.Loop() {
				var wg sync.WaitGroup
				for w := range n {
					wg.Go(func() {
						key := fmt.Sprintf("f%d", w)
						tg := Target{Key: key, Display: "/ws/" + key}
						res, err := editText(context.Background(), s, tg, edits[i%2], &vs[w], ToolWriter("bench"))
						if err != nil {
							b.Error(err)
							return
						}
						vs[w] = res.Version
					})
				}
				wg.Wait()
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/edit")
		})
	}
}

// BenchmarkToolEditSyncs interleaves, round by round, a 4 KiB guarded edit
// followed by what the policy records of it (an observation and a stamp,
// as a tool edit makes), four ways: "unsynced", the index unsynced and no
// directory sync (the edit before commits were durable); "two-commits",
// every commit synced, the observation a commit of its own, no directory
// sync (durable commits as first merged); "one-commit", the observation in
// the edit's commit (AlsoCommit), no directory sync; "dirsync", one commit
// and the publish's directory synced (now). It reports each one's median,
// and the ratios to "unsynced" of the medians, overall and per round.
func BenchmarkToolEditSyncs(b *testing.B) {
	const perRound = 40
	kinds := []string{"unsynced", "two-commits", "one-commit", "dirsync"}
	edit := map[string]func() time.Duration{}
	for _, k := range kinds {
		edit[k] = observedEditor(b, k)
	}
	b.Cleanup(func() { benchNoDirSync = false })
	interleave(b, perRound, kinds, edit, func(k string) { benchNoDirSync = k != "dirsync" })
}

// observedEditor returns a function doing one timed 4 KiB edit and its
// observation on a store of the given kind (see BenchmarkToolEditSyncs).
func observedEditor(b *testing.B, kind string) func() time.Duration {
	text := benchText(4 << 10)
	s, tg := benchStore(b, text)
	s.db.NoSync = kind == "unsynced"
	s.syncPublishes = true // the publishes as they were then
	bucket := []byte("observations")
	if err := s.db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(bucket); return err }); err != nil {
		b.Fatal(err)
	}
	observe := func(tx *bolt.Tx, v Version) error {
		if err := tx.Bucket(bucket).Put([]byte("bench\x00"+tg.Key), v[:]); err != nil {
			return err
		}
		return tx.Bucket(bucket).Put([]byte("bench"), []byte(time.Now().String()))
	}
	v := SumString(text)
	edits := [2]Edit{{Old: "MARK-A", New: "MARK-B"}, {Old: "MARK-B", New: "MARK-A"}}
	i := 0
	return func() time.Duration {
		t0 := time.Now()
		var also []AlsoCommit
		if kind == "one-commit" || kind == "dirsync" {
			also = append(also, observe)
		}
		res, err := editText(context.Background(), s, tg, edits[i%2], &v, ToolWriter("bench"), also...)
		if err == nil && also == nil {
			err = s.db.Update(func(tx *bolt.Tx) error { return observe(tx, res.Version) })
		}
		if err != nil {
			b.Fatal(err)
		}
		v = res.Version
		i++
		return time.Since(t0)
	}
}
