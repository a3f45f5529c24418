package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/s3test"
)

// BenchmarkExtractRemote extracts 12,000 files of 2 KiB through a mount of
// the real binary with --remote and without, interleaved, each round on
// fresh directories (DSHFS_BENCH_ROUNDS of them, 3 by default), and reports
// the median of the ratios. The --remote mount's unmount ships what is
// left, outside the timing: what is timed is what the writer waits for. It
// also counts what the bucket then holds. DSHFS_BENCH_BASE_BIN, if set, is
// an earlier dshfs timed with --remote in each round too (base/plain).
func BenchmarkExtractRemote(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	srv := s3test.Start(b, "hist")
	srv.Setenv(b)
	tree := filepath.Join(b.TempDir(), "tree.tar")
	must(b, makeTree(tree, extractFiles, extractFiles/50, func(*rand.Rand) int { return 2048 }))
	runs := []extractRun{{"without", dshfsBin, ""}, {"with --remote", dshfsBin, "s3://hist/bench%d"}}
	if base := os.Getenv("DSHFS_BENCH_BASE_BIN"); base != "" {
		runs = append(runs, extractRun{"the base binary with --remote", base, "s3://hist/base%d"})
	}
	for b.Loop() {
		ratios := make([][]float64, len(runs))
		for round := range benchRounds(b) {
			took := make([]time.Duration, len(runs))
			for i := range runs { // each round starts with the next run: load drifts
				k := (round + i) % len(runs)
				url := runs[k].url
				if url != "" {
					url = fmt.Sprintf(url, round)
				}
				took[k] = extractOnce(b, runs[k].bin, tree, url)
			}
			line := fmt.Sprintf("round %d: %s %v", round, runs[0].name, took[0])
			for k := 1; k < len(runs); k++ {
				r := took[k].Seconds() / took[0].Seconds()
				ratios[k] = append(ratios[k], r)
				line += fmt.Sprintf(", %s %v (%.2f×)", runs[k].name, took[k], r)
			}
			b.Log(line)
		}
		b.ReportMetric(median(ratios[1]), "remote/plain")
		if len(runs) > 2 {
			b.ReportMetric(median(ratios[2]), "base/plain")
		}
		objs, _ := filepath.Glob(filepath.Join(srv.Dir, "hist", "bench0", "*", "*"))
		b.ReportMetric(float64(len(objs)), "bucket-objects")
	}
}

// extractRun is one way of mounting: the binary, and the --remote URL
// (a format taking the round) unless "".
type extractRun struct{ name, bin, url string }

// extractOnce mounts fresh directories (with --remote url unless ""),
// times tar -xf tree in the mount, and unmounts.
func extractOnce(b *testing.B, bin, tree, url string) time.Duration {
	backing, mnt, state := b.TempDir(), filepath.Join(b.TempDir(), "mnt"), b.TempDir()
	args := []string{"mount", backing, mnt}
	if url != "" {
		args = append(args, "--remote", url)
	}
	mount := dshfsCmd(state, args...)
	mount.Path, mount.Args[0] = bin, bin
	if out, err := mount.CombinedOutput(); err != nil {
		b.Fatalf("dshfs %v: %v\n%s", args, err, out)
	}
	defer func() {
		unmount := dshfsCmd(state, "unmount", mnt)
		unmount.Path, unmount.Args[0] = bin, bin
		if out, err := unmount.CombinedOutput(); err != nil {
			b.Fatalf("unmount: %v\n%s", err, out)
		}
	}()
	must(b, os.Mkdir(filepath.Join(mnt, "x"), 0o755))
	start := time.Now()
	if out, err := inDir(filepath.Join(mnt, "x"), "tar", "-xf", tree).CombinedOutput(); err != nil {
		b.Fatalf("tar: %v\n%s", err, out)
	}
	return time.Since(start)
}
