package quote

import (
	"testing"
	"unicode/utf8"
)

func TestName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"main.go", "main.go"},
		{"dir/with space.txt", "dir/with space.txt"},
		{"café/naïve.txt", "café/naïve.txt"}, // printable non-ASCII stays readable
		{"日本語.md", "日本語.md"},
		{"a/x\ny", `"a/x\ny"`},
		{"\x1b[2Kforged", `"\033[2Kforged"`},
		{"tab\there", `"tab\there"`},
		{"\a\b\f\r\v", `"\a\b\f\r\v"`},
		{"nul\x00", `"nul\000"`},
		{"del\x7f", `"del\177"`},
		{"c1\u009bcsi", `"c1\302\233csi"`}, // C1 CSI: an escape on some terminals
		{"bad\xffutf8", `"bad\377utf8"`},
		{"cut\xe6\x97", `"cut\346\227"`},
		{`say "hi"`, `"say \"hi\""`},
		{`back\slash`, `"back\\slash"`},
	} {
		if got := Name(tc.in); got != tc.want {
			t.Errorf("Name(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"no such checkpoint", "no such checkpoint"},
		{`cannot read "a\b": gone`, `cannot read "a\b": gone`}, // quotes and backslashes are the text's own
		{"cannot read \"x\ny\": gone", `cannot read "x\ny": gone`},
		{"erase\x1b[2K\rline", `erase\033[2K\rline`},
		{"bad\xff", `bad\377`},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzName checks that no quoted name holds a byte a terminal acts on, and
// that a name left alone needed nothing.
func FuzzName(f *testing.F) {
	for _, s := range []string{"a", "a\nb", "\x1b[2K", "\u009b", "\xff", `"\`, "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Name(s), Text(s)} {
			if !utf8.ValidString(out) {
				t.Fatalf("%q: invalid UTF-8 out: %q", s, out)
			}
			for _, r := range out {
				if isControl(r) {
					t.Fatalf("%q: control character %U out: %q", s, r, out)
				}
			}
		}
		if got := Name(s); got == s && !plain(s) {
			t.Fatalf("%q left unquoted", s)
		}
	})
}
