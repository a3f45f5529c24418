package toolapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/versionstore"
)

// BenchmarkToolEditDurability interleaves, round by round on the same
// filesystem, a 4 KiB tool edit (policy, store, index) on two deployments:
// "nosync", the index committed without fsync (synced once a second), and
// "durable", every commit synced before the edit returns. It reports each
// one's median and the ratio of the medians, overall and per round (min
// and max: the machine is shared, that spread is the noise). The goal is
// durable ≤ 1.3× nosync.
func BenchmarkToolEditDurability(b *testing.B) {
	const perRound = 50
	kinds := []string{"nosync", "durable"}
	edit := map[string]func() time.Duration{}
	for _, k := range kinds {
		edit[k] = toolEditor(b, k == "nosync")
	}
	all := map[string][]time.Duration{}
	var ratios []float64
	for b.Loop() {
		round := map[string][]time.Duration{}
		for range perRound {
			for _, k := range kinds {
				round[k] = append(round[k], edit[k]())
			}
		}
		for _, k := range kinds {
			all[k] = append(all[k], round[k]...)
		}
		ratios = append(ratios, float64(median(round["durable"]))/float64(median(round["nosync"])))
	}
	for _, k := range kinds {
		b.ReportMetric(float64(median(all[k]).Microseconds()), k+"-p50-µs")
	}
	b.ReportMetric(float64(median(all["durable"]))/float64(median(all["nosync"])), "durable/nosync")
	slices.Sort(ratios)
	b.ReportMetric(ratios[0], "durable/nosync-min-round")
	b.ReportMetric(ratios[len(ratios)-1], "durable/nosync-max-round")
}

// toolEditor returns a function making one timed 4 KiB tool edit, as an
// actor that has read the file, on a fresh deployment.
func toolEditor(b *testing.B, nosync bool) func() time.Duration {
	ws, mnt := b.TempDir(), filepath.Join(b.TempDir(), "mnt")
	text := strings.Repeat("line of text\n", 315) + "MARK-A\n"
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	st, err := versionstore.Open(ws, filepath.Join(b.TempDir(), "index.db"), versionstore.Options{AliasRoots: []string{mnt}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	st.DB().NoSync = nosync
	pol, err := policy.New(st.DB(), policy.Options{})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(st, pol, Config{MountPoint: mnt})
	if err != nil {
		b.Fatal(err)
	}
	call := func(name string, args map[string]any) {
		raw, _ := json.Marshal(args)
		r, err := svc.Call(context.Background(), name, Request{Actor: "bench", Arguments: raw})
		if err != nil || r.IsError {
			b.Fatal(name, err, r.Text)
		}
	}
	path := filepath.Join(mnt, "f.txt")
	call(ToolRead, map[string]any{"file_path": path})
	marks := [2]string{"MARK-A", "MARK-B"}
	i := 0
	return func() time.Duration {
		t0 := time.Now()
		call(ToolEdit, map[string]any{"file_path": path, "old_string": marks[i%2], "new_string": marks[(i+1)%2]})
		i++
		return time.Since(t0)
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
