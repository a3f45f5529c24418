package fusefs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// What extracting a file costs in FUSE requests, counted (deterministic,
// unlike time). GNU tar as root makes each file with LOOKUP (absent),
// CREATE, the writes, SETATTR ×3 (times, owner, mode) and the close; the
// kernel adds a GETXATTR of security.capability before the first write and
// before the chown, and a GETATTR of the directory the create changed (its
// permission check, default_permissions). With HANDLE_KILLPRIV_V2 there is
// no GETATTR before the chown; in passthrough mode no WRITE and, with
// FOPEN_NOFLUSH, no FLUSH: 8 requests a file the caller waits for and the
// RELEASE it does not.
func TestRequestsPerExtractedFile(t *testing.T) {
	const files = 100
	src := t.TempDir()
	for i := range files {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), bytes.Repeat([]byte("x"), 2048), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(t.TempDir(), "a.tar")
	if out, err := exec.Command("tar", "-C", src, "-cf", archive, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar -c: %v\n%s", err, out)
	}
	var r requests
	m := mountT(t, counting(&r))
	dir := filepath.Join(m.mnt, "x")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.take()
	if out, err := exec.Command("tar", "-C", dir, "-xf", archive).CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	m.waitUnmarked()
	n := r.take()
	per := func(op string) float64 { return float64(n[op]) / files }
	total := 0
	for _, c := range n {
		total += c
	}
	t.Logf("per file: %.2f requests (%v)", float64(total)/files, n)
	// A few requests more than one a file are the directory's own and
	// tar's last ones; tar writes in 10 KiB records, so a quarter of the
	// 2 KiB files take two writes.
	want := map[string][2]float64{"LOOKUP": {1, 1}, "CREATE": {1, 1}, "SETATTR": {3, 3}, "GETATTR": {1, 1},
		"GETXATTR": {2, 2}, "RELEASE": {1, 1}, "WRITE": {0, 0}, "FLUSH": {0, 0}}
	if !m.fs.Passthrough() {
		want["WRITE"], want["FLUSH"] = [2]float64{1, 1.3}, [2]float64{1, 1}
	}
	for op, w := range want {
		if got := per(op); got < w[0] || got > w[1]+0.05 {
			t.Errorf("%s: %.2f a file, want %.2f to %.2f", op, got, w[0], w[1])
		}
	}
}
