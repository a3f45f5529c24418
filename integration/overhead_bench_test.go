package integration

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/versionstore"
)

// BenchmarkOverhead measures what the mount costs against the backing
// filesystem itself, in the same run: extracting a 20,000-file tree, warm
// `git status`, `find` and `du` on it, and a 1 GiB sequential write and warm
// read. Each ratio is reported as a metric (mount time ÷ native time).
// Run it with `make bench`; it needs root and /dev/fuse.
//
// With DSHFS_OPCOUNT=1 it runs the workloads once more through a counting
// mount and logs the FUSE requests per opcode: where the time goes.
func BenchmarkOverhead(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	work := b.TempDir()
	archive := filepath.Join(work, "tree.tar")
	if err := makeTree(archive, 20000, 500); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		native := filepath.Join(work, "native")
		os.RemoveAll(native)
		must(b, os.Mkdir(native, 0o755))
		m := benchMount(b, nil)
		ratios := runWorkloads(b, archive, native, m)
		m.close()
		names := make([]string, 0, len(ratios))
		for k := range ratios {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			b.ReportMetric(ratios[k], k+"-x")
		}
	}
	if os.Getenv("DSHFS_OPCOUNT") != "" {
		counts := &opCounter{n: map[string]int{}}
		native := filepath.Join(work, "native2")
		must(b, os.Mkdir(native, 0o755))
		m := benchMount(b, counts)
		runWorkloads(b, archive, native, m)
		m.close()
		b.Logf("FUSE requests per opcode, all workloads:\n%s", counts)
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

// BenchmarkCaptureOverhead measures what keeping every version's bytes
// costs the 20,000-file extraction: the same tar extracted through a mount
// that keeps bytes and one that keeps versions only, alternating, twice
// each. The metric is capture ÷ no capture.
func BenchmarkCaptureOverhead(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	archive := filepath.Join(b.TempDir(), "tree.tar")
	if err := makeTree(archive, 20000, 500); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var with, without time.Duration
		for range 2 {
			for _, keep := range []bool{false, true} {
				m := benchMountOpts(b, nil, keep)
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

func benchMount(b *testing.B, counts *opCounter) *benchWS { return benchMountOpts(b, counts, true) }

func benchMountOpts(b *testing.B, counts *opCounter, keepBytes bool) *benchWS {
	m := &benchWS{backing: b.TempDir(), mnt: filepath.Join(b.TempDir(), "mnt")}
	must(b, os.Mkdir(m.mnt, 0o755))
	var err error
	m.store, err = versionstore.Open(m.backing, filepath.Join(b.TempDir(), "index.db"), versionstore.Options{
		AliasRoots: []string{m.mnt},
		OnPublish:  func(key string) { m.fs.Invalidate(key) },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),

		CaptureMaxBytes: map[bool]int64{true: 0, false: -1}[keepBytes],
	})
	must(b, err)
	opts := fusefs.Options{}
	if d, err := time.ParseDuration(os.Getenv("DSHFS_BENCH_CACHE")); err == nil {
		opts.CacheTimeout = d // e.g. 30s: what longer kernel caching buys
	}
	if counts != nil {
		opts.Debug, opts.DebugLog = true, log.New(counts, "", 0)
	}
	m.fs, err = fusefs.Mount(m.mnt, m.store, opts)
	must(b, err)
	return m
}

// runWorkloads times each workload natively and through the mount.
func runWorkloads(b *testing.B, archive, native string, m *benchWS) map[string]float64 {
	r := map[string]float64{}
	ratio := func(name string, native, mounted time.Duration) {
		r[name] = mounted.Seconds() / native.Seconds()
		b.Logf("%-14s native %8.3fs  mount %8.3fs  %.2fx", name, native.Seconds(), mounted.Seconds(), r[name])
	}
	ratio("extract", timed(b, "", "tar", "-xf", archive, "-C", native), timed(b, "", "tar", "-xf", archive, "-C", m.mnt))
	// The repository is made outside the mount: only status is measured.
	for _, dir := range []string{native, m.backing} {
		run(b, dir, "git", "init", "-q")
		run(b, dir, "git", "add", "-A")
		run(b, dir, "git", "-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-qm", "tree")
	}
	warm := func(dir string, args ...string) time.Duration {
		timed(b, dir, args[0], args[1:]...)
		return timed(b, dir, args[0], args[1:]...)
	}
	ratio("git-status", warm(native, "git", "status", "--porcelain"), warm(m.mnt, "git", "status", "--porcelain"))
	ratio("find", warm(native, "find", ".", "-type", "f"), warm(m.mnt, "find", ".", "-type", "f"))
	ratio("du", warm(native, "du", "-s", "."), warm(m.mnt, "du", "-s", "."))
	dd := func(dir string) time.Duration {
		return timed(b, dir, "dd", "if=/dev/zero", "of=big", "bs=1M", "count=1024", "status=none")
	}
	ratio("write-1GiB", dd(native), dd(m.mnt))
	ratio("read-1GiB", warm(native, "dd", "if=big", "of=/dev/null", "bs=1M", "status=none"),
		warm(m.mnt, "dd", "if=big", "of=/dev/null", "bs=1M", "status=none"))
	os.Remove(filepath.Join(native, "big"))
	os.Remove(filepath.Join(m.mnt, "big"))
	return r
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

// makeTree writes a tar of n files of 1-3 KiB spread over dirs directories.
func makeTree(path string, n, dirs int) error {
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
		size := 1024 + rng.IntN(2048)
		body := bytes.Repeat(line, size/len(line)+1)[:size]
		hdr := &tar.Header{Name: fmt.Sprintf("d%03d/f%05d.txt", i%dirs, i), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	return tw.Close()
}

func must(b testing.TB, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// opCounter counts go-fuse's debug lines by opcode.
type opCounter struct {
	mu sync.Mutex
	n  map[string]int
}

var opcodeRe = regexp.MustCompile(`rx \d+: ([A-Z_0-9]+)`)

func (c *opCounter) Write(p []byte) (int, error) {
	if m := opcodeRe.FindSubmatch(p); m != nil {
		c.mu.Lock()
		c.n[string(m[1])]++
		c.mu.Unlock()
	}
	return len(p), nil
}

func (c *opCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range c.n {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
	var sb strings.Builder
	for _, e := range all {
		fmt.Fprintf(&sb, "%-16s %8d\n", e.k, e.v)
	}
	return sb.String()
}
