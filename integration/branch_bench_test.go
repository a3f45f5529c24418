//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"golang.org/x/sys/unix"
)

// BenchmarkBranch measures branches (docs/branches.md) against what users
// do without them, every figure a ratio within one run:
//
//   - New: `branch new` of a 10,000-file git repository (a p50 over
//     branchNewRuns, through the socket) against `git worktree add` of the
//     same repository natively, in time and in bytes (`du -sbx` of the new
//     worktree and its administrative directory, of the branch's state),
//     and the same at 100,000 files;
//   - Walk: warm `git status`, `find`, `cat` of every file and a read of
//     a 512 MiB file in a branch against the workspace mount, three
//     rounds alternating;
//   - CopyUp (branch_copyup_bench_test.go): a 1-byte append to a 100 MiB
//     file through a branch on a loop-mounted XFS image with reflink,
//     against `cp` of it with and without reflink there.
//
// Run it with `go test ./integration -run '^$' -bench Branch -benchtime 1x`;
// it needs root and /dev/fuse (and mkfs.xfs for CopyUp).
func BenchmarkBranch(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root: the workspace's mount is compared as root serves it (with passthrough), and CopyUp loop-mounts an XFS image")
	}
	b.Run("New", func(b *testing.B) {
		for b.Loop() {
			benchBranchNew(b)
		}
	})
	b.Run("Walk", func(b *testing.B) {
		ws := newBranchBenchWS(b, repoFiles, true)
		for b.Loop() {
			benchBranchWalk(b, ws)
		}
	})
	b.Run("CopyUp", func(b *testing.B) {
		for b.Loop() {
			benchBranchCopyUp(b)
		}
	})
}

const branchNewRuns = 11

// branchBenchWS is a workspace mounted by the binary, with its own state
// directory, over a git repository of files of 1 to 3 KiB in directories
// of 50, committed natively before the mount and checkpointed through it
// (with big, also an ignored file of writeMiB MiB).
type branchBenchWS struct {
	work, backing, mnt, state string
	env                       []string
	branches                  []string
}

func newBranchBenchWS(b *testing.B, files int, big bool) *branchBenchWS {
	ws := &branchBenchWS{work: b.TempDir()}
	ws.backing, ws.mnt, ws.state = filepath.Join(ws.work, "repo"), filepath.Join(ws.work, "mnt"), filepath.Join(ws.work, "state")
	ws.env = benchEnv(ws.work, "")
	archive := filepath.Join(ws.work, "tree.tar")
	must(b, makeTree(archive, files, files/50, oneToThreeKiB))
	for _, d := range []string{ws.backing, ws.mnt, ws.state} {
		must(b, os.Mkdir(d, 0o755))
	}
	ws.exec(b, ws.backing, "tar", "-xf", archive)
	ws.exec(b, ws.backing, "git", "init", "-q")
	ws.exec(b, ws.backing, "git", "add", "-A")
	ws.exec(b, ws.backing, "git", "commit", "-qm", "tree")
	ws.exec(b, ws.backing, "git", "gc", "-q")
	if big {
		ws.addBigFile(b)
	}
	ws.mount(b)
	if out, code := dshfs(b, ws.state, "checkpoint", "--mount", ws.mnt, "base"); code != 0 {
		b.Fatalf("checkpoint: %s", out)
	}
	return ws
}

// mount mounts the workspace and, at cleanup, drops its branches and
// unmounts it, even when the benchmark failed.
func (ws *branchBenchWS) mount(b *testing.B) {
	if out, code := dshfs(b, ws.state, "mount", ws.backing, ws.mnt); code != 0 {
		b.Fatalf("mount: %s", out)
	}
	b.Cleanup(func() {
		for _, name := range ws.branches {
			dshfs(b, ws.state, "branch", "drop", "--force", "--mount", ws.mnt, name)
		}
		dshfs(b, ws.state, "unmount", ws.mnt)
		unix.Unmount(ws.mnt, mntDetach)
		waitDaemonsGone(b, ws.state)
	})
}

// exec runs a program in dir with a private git configuration.
func (ws *branchBenchWS) exec(b *testing.B, dir, name string, args ...string) {
	b.Helper()
	cmd := inDir(dir, name, args...)
	cmd.Env = ws.env
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %v in %s: %v\n%s", name, args, dir, err, out)
	}
}

func (ws *branchBenchWS) timed(b *testing.B, dir, name string, args ...string) time.Duration {
	b.Helper()
	start := time.Now()
	ws.exec(b, dir, name, args...)
	return time.Since(start)
}

func (ws *branchBenchWS) client(b *testing.B) *unixsocket.Client {
	socket, _ := filepath.Glob(filepath.Join(ws.state, "dshfs", "*", "dshfs.sock"))
	if len(socket) != 1 {
		b.Fatalf("the workspace's socket: found %v", socket)
	}
	return unixsocket.NewClient(socket[0])
}

// newBranch makes a branch through the socket and returns its mount point
// and how long the daemon took.
func (ws *branchBenchWS) newBranch(b *testing.B, name string) (string, time.Duration) {
	b.Helper()
	start := time.Now()
	info, err := ws.client(b).NewBranch(context.Background(), name, "")
	d := time.Since(start)
	if err != nil {
		b.Fatalf("branch new %s: %v", name, err)
	}
	ws.branches = append(ws.branches, name)
	return info.MountPoint, d
}

// branchDir is a branch's directory in the state directory.
func (ws *branchBenchWS) branchDir(b *testing.B, name string) string {
	dirs, _ := filepath.Glob(filepath.Join(ws.state, "dshfs", "*", "branches", name))
	if len(dirs) != 1 {
		b.Fatalf("the directory of branch %s: found %v", name, dirs)
	}
	return dirs[0]
}

// benchBranchNew times branch new on repositories of repoFiles and ten
// times as many files, each against git worktree add of a native clone of
// the same repository, and compares the bytes each makes.
func benchBranchNew(b *testing.B) {
	var p50 []time.Duration
	for _, files := range []int{repoFiles, 10 * repoFiles} {
		ws := newBranchBenchWS(b, files, false)
		p50 = append(p50, ws.timeBranchNew(b, files))
	}
	fmt.Printf("branch new, p50 at %d files / at %d files: %.2f×\n", 10*repoFiles, repoFiles, float64(p50[1])/float64(p50[0]))
	b.ReportMetric(float64(p50[0].Microseconds())/1000, "new-ms")
	b.ReportMetric(float64(p50[1])/float64(p50[0]), "new-100k/10k-x")
}

// timeBranchNew makes branchNewRuns branches, the first half of them each
// after a git worktree add, prints the figures and returns the branches'
// p50.
func (ws *branchBenchWS) timeBranchNew(b *testing.B, files int) time.Duration {
	native := filepath.Join(ws.work, "native")
	ws.exec(b, ws.work, "git", "clone", "-q", "--no-hardlinks", ws.backing, native)
	var branch, worktree []time.Duration
	var branchBytes, worktreeBytes int64
	for i := range branchNewRuns {
		name := fmt.Sprintf("n%d", i)
		if i < branchNewRuns/2 {
			wt := filepath.Join(ws.work, "wt"+name)
			worktree = append(worktree, ws.timed(b, native, "git", "worktree", "add", "-q", "--detach", wt))
			worktreeBytes = duBytes(b, wt) + duBytes(b, filepath.Join(native, ".git", "worktrees", "wt"+name))
		}
		_, d := ws.newBranch(b, name)
		branch = append(branch, d)
		branchBytes = duBytes(b, ws.branchDir(b, name))
	}
	pb, pw := medianDuration(branch), medianDuration(worktree)
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("branch new of a %d-file git repository, p50 of %d: %v (runs %v), %d bytes; git worktree add, p50 of %d: %v (runs %v), %d bytes; time %.3f×, bytes %.4f× (load average %s)\n",
		files, len(branch), pb, roundAll(branch), branchBytes, len(worktree), pw, roundAll(worktree), worktreeBytes,
		float64(pb)/float64(pw), float64(branchBytes)/float64(worktreeBytes), strings.Join(strings.Fields(string(load))[:3], " "))
	return pb
}

// duBytes is `du -sbx` of dir: the bytes of its files and directories on
// its own filesystem (a branch's mounted view is not counted).
func duBytes(b *testing.B, dir string) int64 {
	b.Helper()
	out, err := exec.Command("du", "-sbx", dir).Output()
	if err != nil {
		b.Fatalf("du -sbx %s: %v", dir, err)
	}
	n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	must(b, err)
	return n
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond / 10)
	}
	return out
}

// A walk is a warm read-only workload, run in the root of a repository.
type walk struct {
	name string
	args []string
}

var walks = []walk{
	{"git status", []string{"git", "status", "--porcelain"}},
	{"find", []string{"find", ".", "-type", "f"}},
	{"cat", []string{"sh", "-c", "find . \\( -path ./.git -o -path ./.big \\) -prune -o -type f -print0 | xargs -0 cat >/dev/null"}},
	{"read 512M", []string{"dd", "if=.big/big", "of=/dev/null", "bs=1M", "status=none"}},
}

// addBigFile writes, natively, the file the warm read reads: writeMiB
// MiB in .big/, which git is told to ignore and the cat leaves out.
func (ws *branchBenchWS) addBigFile(b *testing.B) {
	must(b, os.Mkdir(filepath.Join(ws.backing, ".big"), 0o755))
	ws.exec(b, ws.backing, "dd", "if=/dev/zero", "of=.big/big", "bs=1M", fmt.Sprintf("count=%d", writeMiB), "status=none")
	f, err := os.OpenFile(filepath.Join(ws.backing, ".git", "info", "exclude"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	must(b, err)
	_, err = f.WriteString("/.big/\n")
	must(b, err)
	must(b, f.Close())
}

// benchBranchWalk runs each walk once untimed in the workspace and in a
// branch of it, then three rounds alternating, and prints each time. Each
// walk is warmed and timed before the next begins: what one walk leaves
// in the kernel's caches is no part of another's figure (after a cat of
// every file through the workspace's passthrough mount, for one, the
// kernel asks for each file's attributes again at the next lstat).
func benchBranchWalk(b *testing.B, ws *branchBenchWS) {
	br, _ := ws.newBranch(b, fmt.Sprintf("w%d", len(ws.branches)))
	dirs := []string{ws.mnt, br}
	const rounds = 3
	times := map[string][2][]time.Duration{}
	for _, w := range walks {
		for _, dir := range dirs {
			ws.exec(b, dir, w.args[0], w.args[1:]...)
		}
		var t [2][]time.Duration
		for range rounds {
			for i, dir := range dirs {
				t[i] = append(t[i], ws.timed(b, dir, w.args[0], w.args[1:]...))
			}
		}
		times[w.name] = t
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("warm walks of a %d-file git repository, %d rounds alternating (load average %s):\n", repoFiles, rounds, strings.Join(strings.Fields(string(load))[:3], " "))
	for _, w := range walks {
		t := times[w.name]
		ratio := float64(medianDuration(t[1])) / float64(medianDuration(t[0]))
		fmt.Printf("  %-11s workspace %v, branch %v, branch/workspace (medians) %.2f×\n", w.name, roundAll(t[0]), roundAll(t[1]), ratio)
		b.ReportMetric(ratio, strings.ReplaceAll(w.name, " ", "-")+"-x")
	}
}
