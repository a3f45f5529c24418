package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// BenchmarkUnmount times `dshfs unmount` of an idle mount against
// umount(8) of one, each over a fresh mount that had a file written
// through it, alternating, and reports the medians and their ratio
// (unmount/umount). umount(8) leaves the daemon to notice the unmount and
// exit on its own; `dshfs unmount` returns once its daemon has exited, its
// last commits durable. Needs root (umount(8) of a FUSE mount).
func BenchmarkUnmount(b *testing.B) {
	testfuse.Require(b)
	if os.Geteuid() != 0 {
		b.Skip("umount(8) of a FUSE mount needs root")
	}
	const rounds = 15
	for b.Loop() {
		var ours, kernel []time.Duration
		for range rounds {
			ours = append(ours, timeUnmount(b, func(state, mnt string) *exec.Cmd {
				cmd := exec.Command(dshfsBin, "unmount", mnt)
				cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
				return cmd
			}))
			kernel = append(kernel, timeUnmount(b, func(_, mnt string) *exec.Cmd { return exec.Command("umount", mnt) }))
		}
		mo, mk := medianDuration(ours), medianDuration(kernel)
		fmt.Printf("unmount of an idle mount, median of %d: dshfs unmount %v, umount(8) %v, ratio %.2f\n", rounds, mo, mk, float64(mo)/float64(mk))
		b.ReportMetric(float64(mo.Microseconds()), "dshfs-µs")
		b.ReportMetric(float64(mk.Microseconds()), "umount-µs")
		b.ReportMetric(float64(mo)/float64(mk), "ratio")
	}
}

// timeUnmount mounts a fresh workspace, writes a file through it, and
// times the command cmd gives for unmounting it.
func timeUnmount(b *testing.B, cmd func(state, mnt string) *exec.Cmd) time.Duration {
	b.Helper()
	backing, state := b.TempDir(), b.TempDir()
	mnt := filepath.Join(b.TempDir(), "mnt")
	must(b, os.Mkdir(mnt, 0o755))
	if out, code := dshfs(b, state, "mount", backing, mnt); code != 0 {
		b.Fatalf("mount: %s", out)
	}
	must(b, os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644))
	c := cmd(state, mnt)
	start := time.Now()
	out, err := c.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		dshfs(b, state, "unmount", mnt)
		b.Fatalf("%v: %v: %s", c.Args, err, out)
	}
	waitDaemonsGone(b, state)
	return d
}

// waitDaemonsGone waits (untimed) until no dshfs daemon with state as its
// state home runs, so that the next round and the clean-up of the
// directories find it gone.
func waitDaemonsGone(b *testing.B, state string) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !daemonRunning(state) {
			return
		}
	}
	b.Fatalf("the daemon of %s did not exit within 30 s of its unmount", state)
}

func daemonRunning(state string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err == nil && bytes.Contains(env, []byte("XDG_STATE_HOME="+state+"\x00")) {
			return true
		}
	}
	return false
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
