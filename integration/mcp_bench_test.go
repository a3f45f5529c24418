package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkMCP times `dshfs mcp` against the MCP reference filesystem server
// (@modelcontextprotocol/server-filesystem) through the same official
// TypeScript MCP client, in one run, calls interleaved: a read of a 4 KiB
// file and an edit of it. It reports each p50 in µs and dshfs's p50 ÷ the
// reference server's. Goals: read ≤ 0.8×, edit ≤ 1.0×. It needs root, /dev/fuse,
// node and npm (the client and the reference server come from the npm registry,
// at the versions testdata/mcpbench/package-lock.json pins).
//
// DSHFS_MCP_CALLS sets the calls per workload and server (default 2000).
func BenchmarkMCP(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	dir := mcpBenchDir(b)
	calls := 2000
	if n, err := strconv.Atoi(os.Getenv("DSHFS_MCP_CALLS")); err == nil && n > 0 {
		calls = n
	}
	backing, mnt, ref, state := b.TempDir(), filepath.Join(b.TempDir(), "mnt"), b.TempDir(), b.TempDir()
	must(b, os.Mkdir(mnt, 0o755))
	if out, err := dshfsCmd(state, "mount", backing, mnt).CombinedOutput(); err != nil {
		b.Fatalf("mount: %v\n%s", err, out)
	}
	b.Cleanup(func() {
		dshfsCmd(state, "unmount", mnt).Run()
		unix.Unmount(mnt, mntDetach)
	})
	for b.Loop() {
		cmd := exec.Command("node", filepath.Join(dir, "bench.mjs"), strconv.Itoa(calls), dshfsBin, mnt, ref)
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("bench.mjs: %v\n%s", err, out)
		}
		var r map[string]struct{ P50, P90, P99 float64 }
		if err := json.Unmarshal(out, &r); err != nil {
			b.Fatalf("bench.mjs printed %q: %v", out, err)
		}
		for _, op := range []string{"read", "edit"} {
			d, ref := r["dshfs_"+op], r["reference_"+op]
			b.ReportMetric(d.P50, op+"-dshfs-p50-µs")
			b.ReportMetric(ref.P50, op+"-reference-p50-µs")
			b.ReportMetric(d.P50/ref.P50, op+"-p50-x")
			b.Logf("%s: dshfs p50 %.0f p90 %.0f p99 %.0f µs; reference p50 %.0f p90 %.0f p99 %.0f µs",
				op, d.P50, d.P90, d.P99, ref.P50, ref.P90, ref.P99)
		}
	}
}

// mcpBenchDir copies testdata/mcpbench into the user's cache directory and
// installs its pinned packages there once.
func mcpBenchDir(b *testing.B) string {
	b.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		b.Skip("needs node and npm")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(cache, "dshfs", "mcpbench")
	must(b, os.MkdirAll(dir, 0o755))
	lock, err := os.ReadFile("testdata/mcpbench/package-lock.json")
	must(b, err)
	stale := true
	if old, err := os.ReadFile(filepath.Join(dir, "package-lock.json")); err == nil && string(old) == string(lock) {
		_, err := os.Stat(filepath.Join(dir, "node_modules"))
		stale = err != nil
	}
	for _, f := range []string{"package.json", "package-lock.json", "bench.mjs"} {
		data, err := os.ReadFile(filepath.Join("testdata/mcpbench", f))
		must(b, err)
		must(b, os.WriteFile(filepath.Join(dir, f), data, 0o644))
	}
	if stale {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return dir
}

// dshfsCmd is the binary under test with its state under state.
func dshfsCmd(state string, args ...string) *exec.Cmd {
	cmd := exec.Command(dshfsBin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	return cmd
}
