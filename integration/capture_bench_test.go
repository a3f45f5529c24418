package integration

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/versionstore"
)

// BenchmarkCaptureOverhead measures what keeping every version's bytes
// costs the 20,000-file extraction: the same tar extracted through a mount
// that keeps bytes and one that keeps versions only, alternating, twice
// each. The metric is capture ÷ no capture.
func BenchmarkCaptureOverhead(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	archive := filepath.Join(b.TempDir(), "tree.tar")
	if err := makeTree(archive, 20000, 500, oneToThreeKiB); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var with, without time.Duration
		for range 2 {
			for _, keep := range []bool{false, true} {
				m := benchMountOpts(b, keep)
				d := timed(b, "", "tar", "-xf", archive, "-C", m.mnt)
				m.close()
				if keep {
					with += d
				} else {
					without += d
				}
			}
		}
		b.Logf("extract 20k files: bytes kept %.2fs, versions only %.2fs (sums of 2 runs)", with.Seconds(), without.Seconds())
		b.ReportMetric(with.Seconds()/without.Seconds(), "capture-x")
	}
}

type benchWS struct {
	backing, mnt string
	store        *versionstore.Store
	fs           *fusefs.FS
}

func (m *benchWS) close() {
	m.fs.Unmount()
	m.store.Close()
}

func benchMountOpts(b *testing.B, keepBytes bool) *benchWS {
	return benchMountBatched(b, keepBytes, 0)
}

// benchMountBatched is benchMountOpts with the mount's versions committed
// every batchEvery (0: the default).
func benchMountBatched(b *testing.B, keepBytes bool, batchEvery time.Duration) *benchWS {
	m := &benchWS{backing: b.TempDir(), mnt: filepath.Join(b.TempDir(), "mnt")}
	must(b, os.Mkdir(m.mnt, 0o755))
	var err error
	m.store, err = versionstore.Open(m.backing, filepath.Join(b.TempDir(), "index.db"), versionstore.Options{
		AliasRoots: []string{m.mnt},
		OnPublish:  func(key string) { m.fs.Invalidate(key) },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),

		CaptureMaxBytes:    map[bool]int64{true: 0, false: -1}[keepBytes],
		MountBatchInterval: batchEvery,
	})
	must(b, err)
	m.fs, err = fusefs.Mount(m.mnt, m.store, fusefs.Options{})
	must(b, err)
	return m
}

func timed(b *testing.B, dir, name string, args ...string) time.Duration {
	start := time.Now()
	run(b, dir, name, args...)
	return time.Since(start)
}

func run(b *testing.B, dir, name string, args ...string) {
	cmd := exec.Command(name, args...)
	if dir != "" {
		cmd = inDir(dir, name, args...)
	}
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
}

// makeTree writes a tar of n files spread over dirs directories, each
// sized by size and starting with its own name (no two are alike).
func makeTree(path string, n, dirs int, size func(*rand.Rand) int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	rng := rand.New(rand.NewPCG(1, 2))
	line := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog ", 2) + "\n")
	for d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("d%03d/", d), Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	for i := range n {
		name := fmt.Sprintf("d%03d/f%05d.txt", i%dirs, i)
		size := size(rng)
		body := append([]byte(name+"\n"), bytes.Repeat(line, size/len(line)+1)...)[:size]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	return tw.Close()
}

// oneToThreeKiB is a file size of 1 to 3 KiB.
func oneToThreeKiB(rng *rand.Rand) int { return 1024 + rng.IntN(2048) }

func must(b testing.TB, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
