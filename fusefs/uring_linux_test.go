package fusefs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keepURingParam returns what puts the fuse module's enable_uring back as
// it was: mounts with Options.IOUring switch it on for the machine.
func keepURingParam() func() {
	was, err := os.ReadFile(enableURingParam)
	if err != nil {
		return func() {}
	}
	return func() {
		if now, err := os.ReadFile(enableURingParam); err == nil && !bytes.Equal(now, was) {
			os.WriteFile(enableURingParam, []byte(strings.TrimSpace(string(was))), 0)
		}
	}
}

// uringMountT mounts over io_uring, restoring enable_uring at cleanup, and
// skips (saying why) where the kernel serves the mount over /dev/fuse.
func uringMountT(t *testing.T, opts ...func(*Options)) *mounted {
	t.Helper()
	t.Cleanup(keepURingParam())
	m := mountT(t, append([]func(*Options){func(o *Options) { o.IOUring = true }}, opts...)...)
	if name, why := m.fs.Transport(); name != "io_uring" {
		t.Skipf("served over %s: %s", name, why)
	}
	return m
}

func TestURingServesTheMount(t *testing.T) {
	m := uringMountT(t)
	dir := filepath.Join(m.mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 100_000) // 1.6 MB: more than one entry's payload
	for _, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, name), want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %s: %d bytes, %v; want %d bytes", name, len(got), err, len(want))
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 3 {
		t.Fatalf("readdir: %v, %v", ents, err)
	}
	if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "z")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Fatalf("stat a after rename: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(m.backing, "d", "z")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("backing z: %d bytes, %v", len(got), err)
	}
	t.Logf("the rings served %d requests", m.fs.uring.served.Load())
	if n := m.fs.uring.served.Load(); n < 10 {
		t.Errorf("the rings served %d requests, want all of them", n)
	}
}
