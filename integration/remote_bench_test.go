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
	base := os.Getenv("DSHFS_BENCH_BASE_BIN")
	for b.Loop() {
		var ratios, baseRatios []float64
		for round := range benchRounds(b) {
			plain := extractOnce(b, dshfsBin, tree, "")
			remote := extractOnce(b, dshfsBin, tree, fmt.Sprintf("s3://hist/bench%d", round))
			ratios = append(ratios, remote.Seconds()/plain.Seconds())
			line := fmt.Sprintf("round %d: without %v, with --remote %v (%.2f×)", round, plain, remote, remote.Seconds()/plain.Seconds())
			if base != "" {
				old := extractOnce(b, base, tree, fmt.Sprintf("s3://hist/base%d", round))
				baseRatios = append(baseRatios, old.Seconds()/plain.Seconds())
				line += fmt.Sprintf(", the base binary with --remote %v (%.2f×)", old, old.Seconds()/plain.Seconds())
			}
			b.Log(line)
		}
		b.ReportMetric(median(ratios), "remote/plain")
		if base != "" {
			b.ReportMetric(median(baseRatios), "base/plain")
		}
		objs, _ := filepath.Glob(filepath.Join(srv.Dir, "hist", "bench0", "*", "*"))
		b.ReportMetric(float64(len(objs)), "bucket-objects")
	}
}

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
