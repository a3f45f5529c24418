package integration

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkDurableExtraction measures what durable index commits cost the
// mount: the 12,000-file extraction (2 KiB each, 240 directories) through a
// mount as it was before durable commits ("before": commits unsynced, a
// batch every 50 ms), one whose every commit is fdatasynced with that 50 ms
// batch ("durable-50ms"), and the mount as it is ("durable": synced, a
// batch every second or 1,024 versions), interleaved, rounds of one each,
// each kind first in turn.
// It reports the medians, the ratios of the medians to before's, with the
// rounds' smallest and largest ratio (the noise), and the durable commits
// per extraction (deterministic but for the timer: each is two syncs).
func BenchmarkDurableExtraction(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	archive := filepath.Join(b.TempDir(), "tree.tar")
	must(b, makeTree(archive, 12000, 240, func(_ *rand.Rand) int { return 2048 }))
	kinds := []struct {
		name   string
		noSync bool
		every  time.Duration
	}{{"before", true, 50 * time.Millisecond}, {"durable-50ms", false, 50 * time.Millisecond}, {"durable", false, 0}}
	took := map[string][]float64{}
	ratios := map[string][]float64{}
	commits := map[string]int{}
	for i := 0; b.Loop(); i++ {
		round := map[string]float64{}
		for j := range kinds {
			k := kinds[(i+j)%len(kinds)] // each kind goes first in turn
			m := benchMountBatched(b, true, k.every)
			m.store.DB().NoSync = k.noSync
			st, err := m.store.Stats()
			must(b, err)
			round[k.name] = timed(b, "", "tar", "-xf", archive, "-C", m.mnt).Seconds()
			after, err := m.store.Stats()
			must(b, err)
			commits[k.name] = int(after.Commits - st.Commits)
			m.close()
			took[k.name] = append(took[k.name], round[k.name])
		}
		for _, k := range kinds[1:] {
			ratios[k.name] = append(ratios[k.name], round[k.name]/round["before"])
		}
	}
	for _, k := range kinds {
		b.ReportMetric(median(took[k.name]), k.name+"-p50-s")
	}
	for _, k := range kinds[1:] {
		r := ratios[k.name]
		slices.Sort(r)
		b.ReportMetric(median(took[k.name])/median(took["before"]), k.name+"/before")
		b.Logf("%s: %.3f× before (rounds %.2f–%.2f), %d commits per extraction",
			k.name, median(took[k.name])/median(took["before"]), r[0], r[len(r)-1], commits[k.name])
	}
	b.Logf("before: %d commits per extraction", commits["before"])
}
