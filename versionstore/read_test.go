package versionstore

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// Read hands on the exact bytes, in full chunks but the last, and their
// version; what makes them text is not the store's concern.
func TestRead(t *testing.T) {
	ts := openTestStore(t)
	for _, tc := range []struct{ name, content string }{
		{"plain", "hello\nworld\n"},
		{"empty", ""},
		{"a BOM is a byte like any other", "\uFEFF\uFEFFa"},
		{"NUL and invalid UTF-8 too", "h\x00i\xff"},
		{"multi-chunk", strings.Repeat("é€😀x", 40000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.put("f", tc.content)
			var chunks []string
			lasts := 0
			v, err := ts.Read(context.Background(), ts.target("f"), func(chunk []byte, last bool) error {
				if !last && len(chunk) != chunkSize {
					t.Errorf("a chunk before the last holds %d bytes, want %d", len(chunk), chunkSize)
				}
				if last {
					lasts++
				}
				chunks = append(chunks, string(chunk))
				return nil
			})
			must(t, err)
			if got := strings.Join(chunks, ""); got != tc.content || lasts != 1 {
				t.Fatalf("bytes = %q (%d last chunks), want %q", abbrev(got), lasts, abbrev(tc.content))
			}
			if v != SumString(tc.content) {
				t.Fatalf("version = %s, want the hash of the exact bytes", v)
			}
		})
	}
}

// A sink's error ends the read as it is, and nothing is recorded of it.
func TestReadEndsAtTheSinksError(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", strings.Repeat("x", 3*chunkSize))
	errStop := errors.New("not text")
	calls := 0
	_, err := ts.Read(context.Background(), ts.target("f"), func([]byte, bool) error {
		calls++
		return errStop
	})
	if err != errStop || calls != 1 {
		t.Fatalf("error %v after %d calls, want the sink's own after 1", err, calls)
	}
	if h, _ := ts.History("f"); len(h) != 0 {
		t.Fatalf("a refused read recorded %+v", h)
	}
}

func TestReadErrors(t *testing.T) {
	ts := openTestStore(t)
	must(t, os.Mkdir(ts.path("dir"), 0o755))
	must(t, syscall.Mkfifo(ts.path("fifo"), 0o644))
	for _, tc := range []struct {
		rel    string
		reason Reason
	}{
		{"missing", ReasonMissing},
		{"dir", ReasonNotRegular},
		{"fifo", ReasonNotRegular},
	} {
		t.Run(tc.rel, func(t *testing.T) {
			_, _, err := ts.readAll(tc.rel)
			wantErr(t, err, tc.reason, "read", "/ws/"+tc.rel)
		})
	}
}

func abbrev(s string) string {
	if len(s) > 80 {
		return s[:40] + "…" + s[len(s)-40:]
	}
	return s
}

// A file read whole is read only up to the size its stat promised: one that
// grew meanwhile (a terabyte of holes, made by whoever may write it) costs
// no more memory than the limit, and is then hashed as it streams (a
// restore or write) or is a changed file (an edit).
func TestReadWholeIsBounded(t *testing.T) {
	ts := openTestStore(t)
	ts.put("grown.bin", "x")
	if err := os.Truncate(ts.path("grown.bin"), 1<<40); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := ts.readWhole(ts.target("grown.bin"), "read", 1<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errGrew) {
		t.Fatalf("reading a 1 TiB file with a 1 MiB limit: %v, want errGrew", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Fatalf("reading past the limit allocated %d MiB", grew>>20)
	}
	// A write over it keeps working: the file is hashed as it streams.
	ts.put("small.txt", "one\n")
	data, _, err := ts.readWhole(ts.target("small.txt"), "read", 4)
	if err != nil || string(data) != "one\n" {
		t.Fatalf("a file of exactly the limit: %q %v", data, err)
	}
}
