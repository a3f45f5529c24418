package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// TestTamperedObjectRefIsDamage rewrites the segment's record of an object
// with an offset, length or size that does not fit: reading the history
// back names the object damaged, and a scrub sends it again, where they
// panicked (a negative offset sliced the pack) every time the daemon
// started.
func TestTamperedObjectRefIsDamage(t *testing.T) {
	for name, tamper := range map[string]func(ref map[string]any){
		"negative offset":     func(ref map[string]any) { ref["off"] = -4 },
		"negative length":     func(ref map[string]any) { ref["len"] = -1 },
		"offset overflows":    func(ref map[string]any) { ref["off"] = int64(math.MaxInt64 - 2) },
		"size over the limit": func(ref map[string]any) { ref["size"] = int64(1) << 40 },
		"size too large":      func(ref map[string]any) { ref["size"] = int64(1) << 33 },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			r := f.start(f.bucket(), "w1")
			v := f.write("a.txt", strings.Repeat("shipped\n", 50))
			f.caughtUp(r)
			must(t, r.Close(30*time.Second))
			f.tamperSegments(tamper)

			h := f.fetch()
			if _, err := h.Object(context.Background(), v); !errors.Is(err, versionstore.ErrCorrupt) {
				t.Errorf("Object: %v, want ErrCorrupt", err)
			}
			if _, damaged, err := h.Objects(context.Background()); err != nil || len(damaged) != 1 {
				t.Fatalf("Objects: damaged %v, err %v; want the one object", damaged, err)
			}
			f.scrubbed()
			objs, damaged, err := f.fetch().Objects(context.Background())
			if err != nil || len(damaged) != 0 || len(objs[v]) != 400 {
				t.Fatalf("after the scrub: %d bytes, damaged %v, err %v", len(objs[v]), damaged, err)
			}
		})
	}
}

// TestTamperedTreeSizeIsDamage gives the tree reference a size its frame
// cannot reach: reading the workspace fails as damage, taking nothing.
func TestTamperedTreeSizeIsDamage(t *testing.T) {
	f := newFixture(t)
	r := f.start(f.bucket(), "w1")
	f.write("a.txt", "in the tree\n")
	f.caughtUp(r)
	must(t, r.Close(30*time.Second))
	trees := 0
	f.rewriteSegments(func(seg map[string]any) {
		if ref, ok := seg["tree"].(map[string]any); ok {
			ref["size"] = int64(1) << 31
			trees++
		}
	})
	if trees == 0 {
		t.Fatal("no tree in the segments")
	}
	if _, err := f.fetch().Workspace(context.Background()); !errors.Is(err, versionstore.ErrCorrupt) {
		t.Fatalf("Workspace: %v, want ErrCorrupt", err)
	}
}

// tamperSegments rewrites every object record of every segment on the
// server's disk with tamper.
func (f *fixture) tamperSegments(tamper func(ref map[string]any)) {
	f.t.Helper()
	n := 0
	f.rewriteSegments(func(seg map[string]any) {
		objs, _ := seg["objects"].(map[string]any)
		for _, ref := range objs {
			tamper(ref.(map[string]any))
			n++
		}
	})
	if n == 0 {
		f.t.Fatal("no object records in the segments")
	}
}

// rewriteSegments rewrites every segment on the server's disk with edit.
func (f *fixture) rewriteSegments(edit func(seg map[string]any)) {
	f.t.Helper()
	segs, _ := filepath.Glob(filepath.Join(f.server.Dir, testBucket, f.loc.Prefix, "journal", "*.json"))
	for _, p := range segs {
		b, err := os.ReadFile(p)
		f.must(err)
		var seg map[string]any
		f.must(json.Unmarshal(b, &seg))
		edit(seg)
		b, err = json.Marshal(seg)
		f.must(err)
		f.must(os.WriteFile(p, b, 0o644))
	}
}

// scrubbed runs a replicator with Scrub until it has caught up.
func (f *fixture) scrubbed() {
	f.t.Helper()
	r, err := Start(context.Background(), f.store, f.bucket(), Options{Writer: "w1", Interval: 20 * time.Millisecond, Scrub: true})
	if err != nil {
		f.t.Fatal(err)
	}
	f.caughtUp(r)
	f.must(r.Close(30 * time.Second))
	if st := r.Status(); len(st.Damaged) != 0 || st.Error != "" {
		f.t.Fatalf("status after the scrub: %+v", st)
	}
}

// TestOpenAllocatesWhatTheFrameHolds opens a small frame whose record
// claims 8 GiB: it is damage, found without taking the 8 GiB first.
func TestOpenAllocatesWhatTheFrameHolds(t *testing.T) {
	c, err := newCodec()
	must(t, err)
	data := bytes.Repeat([]byte("x"), 1000)
	z := c.enc.EncodeAll(data, nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = c.open(versionstore.Sum(data), z, 1<<33)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, versionstore.ErrCorrupt) {
		t.Errorf("open: %v, want ErrCorrupt", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<30 {
		t.Errorf("open of a %d-byte frame allocated %d bytes", len(z), n)
	}
	got, err := c.open(versionstore.Sum(data), z, int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("open with the true size: %v", err)
	}
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func TestDecodeExactly(t *testing.T) {
	c, err := newCodec()
	must(t, err)
	data := bytes.Repeat([]byte("abc"), 300)
	z := c.enc.EncodeAll(data, nil)
	for _, tc := range []struct {
		name string
		z    []byte
		n    int64
		ok   bool
	}{
		{"its size", z, int64(len(data)), true},
		{"fewer bytes claimed", z, int64(len(data)) - 1, false},
		{"more bytes claimed", z, int64(len(data)) + 1, false},
		{"not a frame", []byte("not zstd at all"), 15, false},
		{"cut short", z[:len(z)/2], int64(len(data)), false},
	} {
		got, err := c.decodeExactly(tc.z, tc.n)
		if ok := err == nil && bytes.Equal(got, data); ok != tc.ok {
			t.Errorf("%s: %d bytes, %v; want ok %v", tc.name, len(got), err, tc.ok)
		}
	}
}

// TestDecodeExactlyTakesTheMostCompressible checks maxRatio against the
// encoder: bytes that compress as far as they can still read back.
func TestDecodeExactlyTakesTheMostCompressible(t *testing.T) {
	c, err := newCodec()
	must(t, err)
	for _, n := range []int{1, 4096, 128 << 10, 16 << 20} {
		data := make([]byte, n)
		z := c.enc.EncodeAll(data, nil)
		if got, err := c.decodeExactly(z, int64(n)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%d zero bytes in a %d-byte frame: %v", n, len(z), err)
		}
	}
}

func TestObjectRefIn(t *testing.T) {
	blob := []byte("0123456789")
	for _, tc := range []struct {
		off, len int64
		want     string
		ok       bool
	}{
		{0, 10, "0123456789", true},
		{3, 4, "3456", true},
		{10, 0, "", true},
		{9, 2, "", false},
		{11, 0, "", false},
		{-1, 2, "", false},
		{2, -1, "", false},
		{math.MaxInt64, 1, "", false},
		{1, math.MaxInt64, "", false},
		{math.MaxInt64 - 2, 10, "", false},
	} {
		got, ok := objectRef{Off: tc.off, Len: tc.len}.in(blob)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("off %d len %d: %q, %v; want %q, %v", tc.off, tc.len, got, ok, tc.want, tc.ok)
		}
	}
}
