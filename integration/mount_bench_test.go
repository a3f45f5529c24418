package integration

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkMount runs the same workloads, in one run, on the backing
// filesystem itself (native), through dshfs with kernel passthrough (the
// default as root), through dshfs --no-passthrough, through libfuse's C
// loopback (passthrough_ll) and through go-fuse's loopback example, and
// prints their times, the ratios between them, each daemon's CPU and, from
// a separate untimed pass with request logging on, the FUSE requests of
// each workload. Every figure that is judged is a ratio against a system
// measured in the same run: the machine is shared and noisy.
//
// Each round serves every system over a fresh backing directory, in an
// order rotated from round to round; nothing is deleted until the end (on
// ext4 a big deletion slows what follows). The figures are medians over
// DSHFS_BENCH_ROUNDS rounds (default 3). Run it with `make bench`; it needs
// root, /dev/fuse, gcc and libfuse3-dev with pkg-config, git and tar.
func BenchmarkMount(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	raiseFileLimit(b)
	systems := benchSystems(b, b.TempDir())
	fx := prepareFixtures(b)
	for b.Loop() {
		res := measureRounds(b, fx, systems, benchRounds(b))
		counts := countRequests(b, fx, systems[1:])
		fmt.Print(report(fx, res, counts))
		reportMetrics(b, res)
	}
}

// The workloads' sizes.
const (
	extractFiles = 12000 // 2 KiB each
	repoFiles    = 10000 // 1-3 KiB each
	writeMiB     = 512
)

func benchRounds(b *testing.B) int {
	s := os.Getenv("DSHFS_BENCH_ROUNDS")
	if s == "" {
		return 3
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("DSHFS_BENCH_ROUNDS=%q: want a positive number", s)
	}
	return n
}

// fixtures are what the workloads start from, made once, natively.
type fixtures struct {
	tree   string   // tar of extractFiles files
	repo   string   // a git repository of repoFiles files, packed
	source string   // tar of dshfs's committed source tree
	env    []string // for git and go: private HOME and config, warm caches, no network
	// goCache is the build cache every go build shares: warmed with the
	// standard library and the module dependencies (built once,
	// natively); dshfs's own packages are compiled again in each mount,
	// because the cache keys a package of the main module by its
	// directory, which is new each time.
	goCache string
}

func prepareFixtures(b *testing.B) *fixtures {
	work := b.TempDir()
	fx := &fixtures{tree: filepath.Join(work, "tree.tar"), repo: filepath.Join(work, "repo"), source: filepath.Join(work, "src.tar")}
	fx.goCache = benchGoCache(b)
	fx.env = benchEnv(work, fx.goCache)
	must(b, makeTree(fx.tree, extractFiles, extractFiles/50, func(*rand.Rand) int { return 2048 }))
	fx.makeRepo(b, filepath.Join(work, "repo.tar"))
	run(b, "", "git", "-C", "..", "archive", "--format=tar", "-o", fx.source, "HEAD")
	fx.warmGoCache(b, filepath.Join(work, "warm"))
	return fx
}

// benchGoCache is kept between runs in the user's cache directory, so
// only the first run pays for compiling the standard library.
func benchGoCache(b *testing.B) string {
	dir, err := os.UserCacheDir()
	must(b, err)
	dir = filepath.Join(dir, "dshfs", "bench-gocache")
	must(b, os.MkdirAll(dir, 0o755))
	return dir
}

func benchEnv(work, goCache string) []string {
	return append(os.Environ(), "HOME="+filepath.Join(work, "home"), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0", "GIT_CONFIG_KEY_1=maintenance.auto", "GIT_CONFIG_VALUE_1=false",
		"GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@example.com",
		"GOCACHE="+goCache, "GOFLAGS=-buildvcs=false -mod=readonly", "GOPROXY=off", "GOTOOLCHAIN=local")
}

// makeRepo commits a tree of repoFiles files, natively, and packs it.
func (fx *fixtures) makeRepo(b *testing.B, archive string) {
	must(b, makeTree(archive, repoFiles, repoFiles/50, oneToThreeKiB))
	must(b, os.Mkdir(fx.repo, 0o755))
	fx.cmd(b, fx.repo, "tar", "-xf", archive)
	fx.cmd(b, fx.repo, "git", "init", "-q")
	fx.cmd(b, fx.repo, "git", "add", "-A")
	fx.cmd(b, fx.repo, "git", "commit", "-qm", "tree")
	fx.cmd(b, fx.repo, "git", "gc", "-q")
}

// warmGoCache downloads the module dependencies (into the usual module
// cache) and builds the source once in dir, natively.
func (fx *fixtures) warmGoCache(b *testing.B, dir string) {
	must(b, os.Mkdir(dir, 0o755))
	fx.cmd(b, dir, "tar", "-xf", fx.source)
	download := exec.Command("go", "mod", "download")
	download.Dir, download.Env = dir, append(fx.env, "GOPROXY="+goEnv(b, "GOPROXY"))
	if out, err := download.CombinedOutput(); err != nil {
		b.Fatalf("go mod download: %v\n%s", err, out)
	}
	fx.cmd(b, dir, "go", "build", "./...")
}

func goEnv(b *testing.B, name string) string {
	out, err := exec.Command("go", "env", name).Output()
	must(b, err)
	return strings.TrimSpace(string(out))
}

// cmd runs a program in dir with the fixtures' environment and returns its
// standard error.
func (fx *fixtures) cmd(b *testing.B, dir, name string, args ...string) string {
	c := exec.Command(name, args...)
	c.Dir, c.Env = dir, fx.env
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		b.Fatalf("%s %v in %s: %v\n%s", name, args, dir, err, stderr.String())
	}
	return stderr.String()
}

// A workload is an untimed preparation and a timed part, both run in the
// directory a system serves. A fresh one starts on a new mount of a new
// backing directory: a loopback's open descriptors (one an inode) stay
// under the file limit.
type workload struct {
	name  string
	fresh bool
	prep  func(b *testing.B, fx *fixtures, dir string)
	timed func(b *testing.B, fx *fixtures, dir string)
}

// Workload names.
const (
	wExtract = "extract 12k"
	wClone   = "git clone 10k"
	wStatus  = "git status"
	wFind    = "find"
	wDu      = "du"
	wBuild   = "go build"
	wWrite   = "write 512M"
	wRead    = "warm read"
)

// workloads run in this order on each system: the walks are on the clone.
var workloads = []workload{
	{wExtract, true, mkdir("x"), in("x", "tar", "-xf", "{tree}")},
	{wClone, true, nil, in(".", "git", "clone", "-q", "--no-hardlinks", "{repo}", "repo")},
	{wStatus, false, in("repo", "git", "status", "--porcelain"), in("repo", "git", "status", "--porcelain")},
	{wFind, false, in("repo", "find", ".", "-type", "f"), in("repo", "find", ".", "-type", "f")},
	{wDu, false, in("repo", "du", "-s", "."), in("repo", "du", "-s", ".")},
	{wBuild, true, unpackSource, goBuild},
	{wWrite, false, nil, in(".", "dd", "if=/dev/zero", "of=big", "bs=1M", fmt.Sprintf("count=%d", writeMiB), "conv=fsync", "status=none")},
	{wRead, false, in(".", "dd", "if=big", "of=/dev/null", "bs=1M", "status=none"), in(".", "dd", "if=big", "of=/dev/null", "bs=1M", "status=none")},
}

func mkdir(rel string) func(*testing.B, *fixtures, string) {
	return func(b *testing.B, _ *fixtures, dir string) { must(b, os.Mkdir(filepath.Join(dir, rel), 0o755)) }
}

// in runs a program in dir/rel; "{tree}" and "{repo}" in its arguments
// stand for the fixtures'.
func in(rel, name string, args ...string) func(*testing.B, *fixtures, string) {
	return func(b *testing.B, fx *fixtures, dir string) {
		r := strings.NewReplacer("{tree}", fx.tree, "{repo}", fx.repo)
		expanded := make([]string, len(args))
		for i, a := range args {
			expanded[i] = r.Replace(a)
		}
		fx.cmd(b, filepath.Join(dir, rel), name, expanded...)
	}
}

func unpackSource(b *testing.B, fx *fixtures, dir string) {
	mkdir("src")(b, fx, dir)
	fx.cmd(b, filepath.Join(dir, "src"), "tar", "-xf", fx.source)
}

// goBuild builds every package and checks that dshfs's own were compiled
// here, not found in the cache.
func goBuild(b *testing.B, fx *fixtures, dir string) {
	out := fx.cmd(b, filepath.Join(dir, "src"), "go", "build", "-v", "./...")
	if !strings.Contains(out, "github.com/dshfs/dshfs/fusefs") {
		b.Fatalf("go build in the mount compiled nothing of dshfs's own:\n%s", out)
	}
}

// A sample is one timed part: its wall time and the daemon's CPU time.
type sample struct{ wall, cpu time.Duration }

// results are the samples of each system and workload, one per round.
type results map[string]map[string][]sample

// measureRounds runs every workload on every system, rounds times, each
// round in another order of the systems.
func measureRounds(b *testing.B, fx *fixtures, systems []benchSystem, rounds int) results {
	res := results{}
	for r := range rounds {
		for i := range systems {
			sys := systems[(i+r)%len(systems)]
			res.add(sys.name, measureSystem(b, fx, sys))
			fmt.Printf("round %d/%d: %s done\n", r+1, rounds, sys.name)
		}
	}
	return res
}

func (res results) add(system string, round map[string]sample) {
	if res[system] == nil {
		res[system] = map[string][]sample{}
	}
	for w, s := range round {
		res[system][w] = append(res[system][w], s)
	}
}

// measureSystem serves sys over fresh directories and times each workload.
func measureSystem(b *testing.B, fx *fixtures, sys benchSystem) map[string]sample {
	var s *served
	round := map[string]sample{}
	for _, w := range workloads {
		if w.fresh {
			s = s.restart(b, sys, nil)
		}
		if w.prep != nil {
			w.prep(b, fx, s.dir)
		}
		cpu, start := s.cpu(b), time.Now()
		w.timed(b, fx, s.dir)
		wall := time.Since(start)
		round[w.name] = sample{wall: wall, cpu: s.settledCPU(b) - cpu}
	}
	s.stop()
	return round
}
