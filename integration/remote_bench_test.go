package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/s3test"
)

// BenchmarkExtractRemote extracts 12,000 files of 2 KiB through a mount of
// the real binary with --remote and without, interleaved, each round on
// fresh directories, and reports the median of the ratios. The --remote
// mount's unmount ships what is left, outside the timing: what is timed is
// what the writer waits for. It also counts what the bucket then holds.
func BenchmarkExtractRemote(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	srv := s3test.Start(b, "hist")
	srv.Setenv(b)
	tree := filepath.Join(b.TempDir(), "tree.tar")
	must(b, makeTree(tree, extractFiles, extractFiles/50, func(*rand.Rand) int { return 2048 }))
	for b.Loop() {
		var ratios []float64
		for round := range 3 {
			plain := extractOnce(b, tree, "")
			url := fmt.Sprintf("s3://hist/bench%d", round)
			remote := extractOnce(b, tree, url)
			ratios = append(ratios, remote.Seconds()/plain.Seconds())
			b.Logf("round %d: without %v, with --remote %v (%.2f×)", round, plain, remote, remote.Seconds()/plain.Seconds())
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[1], "remote/plain")
		objs, _ := filepath.Glob(filepath.Join(srv.Dir, "hist", "bench0", "*", "*"))
		b.ReportMetric(float64(len(objs)), "bucket-objects")
	}
}

// extractOnce mounts fresh directories (with --remote url unless ""),
// times tar -xf tree in the mount, and unmounts.
func extractOnce(b *testing.B, tree, url string) time.Duration {
	backing, mnt, state := b.TempDir(), filepath.Join(b.TempDir(), "mnt"), b.TempDir()
	args := []string{"mount", backing, mnt}
	if url != "" {
		args = append(args, "--remote", url)
	}
	if out, err := dshfsCmd(state, args...).CombinedOutput(); err != nil {
		b.Fatalf("dshfs %v: %v\n%s", args, err, out)
	}
	defer func() {
		if out, err := dshfsCmd(state, "unmount", mnt).CombinedOutput(); err != nil {
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
