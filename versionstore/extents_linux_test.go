package versionstore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A sparse file is read extent by extent, its holes left as the zeros they
// read as: the captured bytes and version are those of a plain read.
func TestSparseFileCapturedAsRead(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.MountBatchInterval = 0 })
	path := filepath.Join(ts.dir, "sparse")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		off int64
		s   string
	}{{0, "head"}, {3 << 20, "middle"}, {5<<20 + 17, "late"}} {
		if _, err := f.WriteAt(bytes.Repeat([]byte(w.s), 1000), w.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(8 << 20); err != nil { // a hole to the end
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, fi.Size())
	n, err := readExtents(f, fi, buf)
	f.Close()
	want, _ := os.ReadFile(path)
	if err != nil || n != len(want) || !bytes.Equal(buf, want) {
		t.Fatalf("readExtents: %d of %d bytes, equal %v, %v", n, len(want), bytes.Equal(buf, want), err)
	}
	v, err := ts.mount.Refresh("sparse", Writer{Kind: WriterMount, Pid: 1})
	if err != nil || v != Sum(want) {
		t.Fatalf("Refresh of the sparse file: %v, %v; want %v", v, err, Sum(want))
	}
	ts.mount.flush()
	if got, err := ts.Object(v); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("kept bytes: %d, equal %v, %v", len(got), bytes.Equal(got, want), err)
	}
}

// A file without holes is left to the plain read.
func TestDenseFileReadPlainly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dense")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if n, err := readExtents(f, fi, make([]byte, fi.Size())); n != 0 || err != nil {
		t.Fatalf("readExtents of a dense file: %d, %v; want 0", n, err)
	}
}
