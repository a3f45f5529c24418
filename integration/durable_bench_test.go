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
// mount whose index commits without fsync (the index before durable
// commits) and one whose every commit is fdatasynced (now), interleaved,
// rounds of one each. It reports the medians and the ratio of the medians,
// with the rounds' smallest and largest ratio (the noise), and the index's
// page writes per extraction: the mount's versions ride a commit every
// 50 ms or every batch-limit changes, so durable commits add syncs per
// batch, not per file.
func BenchmarkDurableExtraction(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	archive := filepath.Join(b.TempDir(), "tree.tar")
	must(b, makeTree(archive, 12000, 240, func(_ *rand.Rand) int { return 2048 }))
	kinds := []string{"nosync", "durable"}
	took := map[string][]float64{}
	pages := map[string]int64{}
	var ratios []float64
	for b.Loop() {
		round := map[string]time.Duration{}
		for _, k := range kinds {
			m := benchMountOpts(b, true)
			m.store.DB().NoSync = k == "nosync"
			st := m.store.DB().Stats()
			before := st.TxStats.GetWrite()
			round[k] = timed(b, "", "tar", "-xf", archive, "-C", m.mnt)
			st = m.store.DB().Stats()
			pages[k] = st.TxStats.GetWrite() - before
			m.close()
			took[k] = append(took[k], round[k].Seconds())
		}
		ratios = append(ratios, round["durable"].Seconds()/round["nosync"].Seconds())
	}
	for _, k := range kinds {
		b.ReportMetric(median(took[k]), k+"-p50-s")
	}
	b.ReportMetric(median(took["durable"])/median(took["nosync"]), "durable/nosync")
	slices.Sort(ratios)
	b.ReportMetric(ratios[0], "min-round")
	b.ReportMetric(ratios[len(ratios)-1], "max-round")
	b.Logf("page writes per extraction: nosync %d, durable %d", pages["nosync"], pages["durable"])
}
