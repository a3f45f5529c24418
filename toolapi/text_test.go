package toolapi

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dshfs/dshfs/versionstore"
)

// decode feeds content to a textDecoder in chunks of size bytes, as the
// store's Read does, and returns the text and the error.
func decode(content string, size int) (string, error) {
	var b strings.Builder
	d := &textDecoder{display: "/ws/f", sink: func(s string) {
		if !utf8.ValidString(s) {
			panic("the decoder split a rune")
		}
		b.WriteString(s)
	}}
	for {
		n := min(size, len(content))
		if err := d.feed([]byte(content[:n]), n == len(content)); err != nil {
			return b.String(), err
		}
		if content = content[n:]; content == "" {
			return b.String(), nil
		}
	}
}

func TestTextDecoder(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"plain", "hello\nworld\n", "hello\nworld\n"},
		{"empty", "", ""},
		{"bom stripped once", "\uFEFF\uFEFFa", "\uFEFFa"},
		{"late NUL reads fine", strings.Repeat("a", binarySniff) + "\x00b", strings.Repeat("a", binarySniff) + "\x00b"},
		{"runes across chunk edges", strings.Repeat("é€😀x", 40000), strings.Repeat("é€😀x", 40000)},
	} {
		for _, size := range []int{1, 3, 7, 64 << 10} {
			got, err := decode(tc.content, size)
			if err != nil || got != tc.want {
				t.Errorf("%s in %d-byte chunks: %q, %v; want %q", tc.name, size, abbrev(got), err, abbrev(tc.want))
			}
		}
	}
}

// A file that is not text is refused in the reference implementation's words: a
// NUL in the first 8192 bytes is "binary file" whatever follows, invalid UTF-8
// anywhere (a rune cut short at the end too) is "invalid UTF-8 text".
func TestTextDecoderRefusals(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{"h\x00i", `cannot read "/ws/f": binary file`},
		{"\xff\x00", `cannot read "/ws/f": binary file`},
		{strings.Repeat("a", binarySniff-1) + "\x00", `cannot read "/ws/f": binary file`},
		{"h\xffi", `cannot read "/ws/f": invalid UTF-8 text`},
		{strings.Repeat("x", 3*64<<10) + "\xff", `cannot read "/ws/f": invalid UTF-8 text`},
		{"abc\xe2\x82", `cannot read "/ws/f": invalid UTF-8 text`},
	} {
		for _, size := range []int{1, 5, 64 << 10} {
			_, err := decode(tc.content, size)
			var te *toolError
			if !errors.As(err, &te) || te.msg != tc.want || te.code != versionstore.CodeNotText {
				t.Errorf("%q in %d-byte chunks: %v, want %s", abbrev(tc.content), size, err, tc.want)
			}
		}
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
