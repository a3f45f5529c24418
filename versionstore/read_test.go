package versionstore

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestReadText(t *testing.T) {
	ts := openTestStore(t)
	must(t, os.Mkdir(ts.path("dir"), 0o755))
	for _, tc := range []struct {
		name, content, want string
	}{
		{"plain", "hello\nworld\n", "hello\nworld\n"},
		{"empty", "", ""},
		{"bom stripped once", "\uFEFF\uFEFFa", "\uFEFFa"},
		{"late NUL reads fine", strings.Repeat("a", binarySniff) + "\x00b", strings.Repeat("a", binarySniff) + "\x00b"},
		{"multi-chunk with runes across chunk edges", strings.Repeat("é€😀x", 40000), strings.Repeat("é€😀x", 40000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.put("f", tc.content)
			var chunks []string
			v, err := ts.ReadText(context.Background(), ts.target("f"), func(s string) { chunks = append(chunks, s) })
			must(t, err)
			if got := strings.Join(chunks, ""); got != tc.want {
				t.Fatalf("text = %q, want %q", abbrev(got), abbrev(tc.want))
			}
			if v != SumString(tc.content) {
				t.Fatalf("version = %s, want the hash of the exact bytes", v)
			}
		})
	}
}

func TestReadTextErrors(t *testing.T) {
	ts := openTestStore(t)
	must(t, os.Mkdir(ts.path("dir"), 0o755))
	ts.put("nul", "h\x00i")
	ts.put("ff", "h\xffi")
	ts.put("late-invalid", strings.Repeat("x", 3*chunkSize)+"\xff")
	ts.put("truncated-rune", "abc\xe2\x82")
	ts.put("nul-and-invalid", "\xff\x00")
	must(t, syscall.Mkfifo(ts.path("fifo"), 0o644))
	for _, tc := range []struct {
		rel    string
		reason Reason
	}{
		{"missing", ReasonMissing},
		{"dir", ReasonNotRegular},
		{"fifo", ReasonNotRegular},
		{"nul", ReasonBinary},
		{"ff", ReasonInvalidUTF8},
		{"late-invalid", ReasonInvalidUTF8},
		{"truncated-rune", ReasonInvalidUTF8},
		{"nul-and-invalid", ReasonBinary},
	} {
		t.Run(tc.rel, func(t *testing.T) {
			_, _, err := ts.readAll(tc.rel)
			wantErr(t, err, tc.reason, "read", "/ws/"+tc.rel)
		})
	}
}

func TestCompletePrefix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"a\xc3", 1}, {"a\xc3\xa9", 3}, {"a\xe2\x82", 1}, {"a\xf0\x9f\x98", 1},
		{"a\xf0\x9f\x98\x80", 5}, {"a\x80", 2}, {"a\xff", 2},
	} {
		if got := completePrefix([]byte(tc.in)); got != tc.want {
			t.Errorf("completePrefix(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func abbrev(s string) string {
	if len(s) > 80 {
		return s[:40] + "…" + s[len(s)-40:]
	}
	return s
}
