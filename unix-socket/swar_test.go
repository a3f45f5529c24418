package unixsocket

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// jsonString is s as encoding/json writes it, HTML escaping off.
func jsonString(t testing.TB, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Every byte that is not plain, at every place in and around a word, is
// escaped by appendString and unescaped by the parser as encoding/json
// does: the eight-byte skipping must stop for each.
func TestWordAtATimeStopsAtEveryByte(t *testing.T) {
	specials := []string{"\x00", "\x01", "\x1f", "\n", "\t", "\"", "\\", "\x7f", "\x80", "\xff", "é", "😀", "\u2028", "\u2029",
		"\xe2\x80", "\xed\xa0\x80", "/", "<", "&", " ", "~", "!", "#", "[", "]", "\x21", "\x5b", "\x5d", "\x5c\x5c"}
	base := strings.Repeat("abcdefgh", 3)
	for _, sp := range specials {
		for at := 0; at <= len(base); at++ {
			for _, s := range []string{base[:at] + sp + base[at:], base[:at] + sp + base[at:] + sp, sp + base[:at]} {
				want := jsonString(t, s)
				got := appendString(nil, s)
				if !bytes.Equal(got, want) {
					t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
				}
				// The parser reads encoding/json's output and an escaped
				// form of it back to what json.Unmarshal gives.
				for _, enc := range [][]byte{want, []byte(strings.ReplaceAll(string(want), "a", `\u0061`))} {
					var wantS string
					if err := json.Unmarshal(enc, &wantS); err != nil {
						t.Fatal(err)
					}
					p := parser{b: enc}
					gotS, ok := p.str()
					if !ok || gotS != wantS || p.i != len(enc) {
						t.Fatalf("str(%s) = %q %v at %d, want %q", enc, gotS, ok, p.i, wantS)
					}
				}
			}
		}
	}
}

func TestPlainWord(t *testing.T) {
	for c := range 256 {
		plain := c >= 0x20 && c < 0x80 && c != '"' && c != '\\'
		for at := range 8 {
			w := []byte("abcdefgh")
			w[at] = byte(c)
			if got := plainWord(wordAt(w, 0)); got != plain {
				t.Fatalf("byte %#x at %d: plain %v, want %v", c, at, got, plain)
			}
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("line\tof text\n with \"quotes\" and \\ é \u2028 \xff")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := appendString(nil, s), jsonString(t, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}
