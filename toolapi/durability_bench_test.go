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
// filesystem, a 4 KiB tool edit (policy, store, index) on three
// deployments: "nosync", the index committed without fsync (synced once a
// second), every publish synced; "synced", every commit and publish synced
// before the edit returns (SyncPublishes); "now", the commit synced, the
// publish settled after it. Each edit follows 5 ms of quiet, untimed, as a
// model's edits are seconds apart. It reports each one's median and the
// ratios of the medians to nosync, overall and per round (min and max: the
// spread is the noise). The store's BenchmarkEditDurability isolates the
// design; here its nosync also syncs the directory, which the edit before
// durable commits did not, so these ratios are a little low.
func BenchmarkToolEditDurability(b *testing.B) {
	const perRound = 50
	kinds := []string{"nosync", "synced", "now"}
	edit := map[string]func() time.Duration{}
	for _, k := range kinds {
		edit[k] = toolEditor(b, k)
	}
	all := map[string][]time.Duration{}
	ratios := map[string][]float64{}
	for b.Loop() {
		round := map[string][]time.Duration{}
		for range perRound {
			for _, k := range kinds {
				time.Sleep(5 * time.Millisecond)
				round[k] = append(round[k], edit[k]())
			}
		}
		for _, k := range kinds {
			all[k] = append(all[k], round[k]...)
			ratios[k] = append(ratios[k], float64(median(round[k]))/float64(median(round["nosync"])))
		}
	}
	for _, k := range kinds {
		b.ReportMetric(float64(median(all[k]).Microseconds()), k+"-p50-µs")
		if k == "nosync" {
			continue
		}
		b.ReportMetric(float64(median(all[k]))/float64(median(all["nosync"])), k+"/nosync")
		slices.Sort(ratios[k])
		b.ReportMetric(ratios[k][0], k+"-min-round")
		b.ReportMetric(ratios[k][len(ratios[k])-1], k+"-max-round")
	}
}

// toolEditor returns a function making one timed 4 KiB tool edit, as an
// actor that has read the file, on a fresh deployment.
func toolEditor(b *testing.B, kind string) func() time.Duration {
	ws, mnt := b.TempDir(), filepath.Join(b.TempDir(), "mnt")
	text := strings.Repeat("line of text\n", 315) + "MARK-A\n"
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	st, err := versionstore.Open(ws, filepath.Join(b.TempDir(), "index.db"), versionstore.Options{AliasRoots: []string{mnt}, SyncPublishes: kind != "now"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	st.DB().NoSync = kind == "nosync"
	pol, err := policy.New(st.Observations(), policy.Options{})
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
