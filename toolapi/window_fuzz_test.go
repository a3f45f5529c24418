package toolapi

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// referenceWindow is a direct, whole-input transcription of the reference
// implementation's buildWindow, working on UTF-16 like JavaScript does. It shares
// no code with window, so that the fuzzer can check one against the other.
func referenceWindow(text string, p windowParams) windowResult {
	parts := strings.Split(text, "\n")
	if parts[len(parts)-1] == "" {
		// The remainder after the last "\n" is only a line if non-empty.
		parts = parts[:len(parts)-1]
	}
	res := windowResult{Lines: []Line{}}
	outputBytes := 0
	for i, part := range parts {
		units := utf16.Encode([]rune(part))
		if len(units) > p.maxLen+1 {
			units = units[:p.maxLen+1]
		}
		if n := len(units); n > 0 && units[n-1] == '\r' {
			units = units[:n-1]
		}
		res.Total = i + 1
		if res.Truncated || res.Total < p.offset || len(res.Lines) >= p.limit {
			continue
		}
		text := referenceTruncate(units, p.maxLen)
		cost := len(text)
		if len(res.Lines) > 0 {
			cost++
		}
		if outputBytes+cost > p.maxBytes {
			res.Truncated = true
			continue
		}
		res.Lines = append(res.Lines, Line{Number: res.Total, Text: text})
		outputBytes += cost
	}
	return res
}

// referenceTruncate is line.substring(0, maxLen) plus the marker, except that
// a surrogate pair cut in half is dropped whole.
func referenceTruncate(units []uint16, maxLen int) string {
	if len(units) <= maxLen {
		return string(utf16.Decode(units))
	}
	cut := units[:maxLen]
	if n := len(cut); n > 0 && 0xD800 <= cut[n-1] && cut[n-1] < 0xDC00 {
		cut = cut[:n-1]
	}
	return string(utf16.Decode(cut)) + "... (line truncated to " + strconv.Itoa(maxLen) + " chars)"
}

// pseudoRandomChunks splits s at rune boundaries into chunks whose sizes come
// from a small deterministic generator seeded by seed.
func pseudoRandomChunks(s string, seed uint64) []string {
	var chunks []string
	state := seed | 1
	for s != "" {
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		n := min(int(state%17), len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		chunks = append(chunks, s[:n]) // may be empty: Write must accept that
		s = s[n:]
	}
	return chunks
}

func FuzzWindow(f *testing.F) {
	seeds := []string{
		"", "\n", "a\n\r", "a\r\nb\r\n", "hello\nworld", "l1\nl2\nl3\nl4\nl5",
		"aaaa\nbbbb\ncccc", "abcdefgh", "ab😀cd", "abcd\rXYZ\r\n", "a😀\rzz\n\n",
		"é\r\r\n\r\n😀😀😀\n", strings.Repeat("line\r\n", 40),
	}
	for i, s := range seeds {
		f.Add(s, uint16(1+i%3), uint16(2+i%4), uint16(3+i%5), uint16(9+i*7))
	}
	f.Fuzz(func(t *testing.T, text string, offset, limit, maxLen, maxBytes uint16) {
		if !utf8.ValidString(text) {
			t.Skip()
		}
		// Map to >= 1, keeping small values (where the edge cases live) common.
		p := windowParams{
			offset:   1 + int(offset%64),
			limit:    1 + int(limit%64),
			maxLen:   1 + int(maxLen%64),
			maxBytes: 1 + int(maxBytes),
		}
		got := feedWindow(p, []string{text})
		for name, chunks := range map[string][]string{
			"rune by rune":  splitRuneChunks(text, 1),
			"pseudo-random": pseudoRandomChunks(text, uint64(offset)<<48|uint64(limit)<<32|uint64(maxLen)<<16|uint64(maxBytes)),
		} {
			if other := feedWindow(p, chunks); !reflect.DeepEqual(other, got) {
				t.Fatalf("%s: got %+v, whole input gave %+v", name, other, got)
			}
		}
		if want := referenceWindow(text, p); !reflect.DeepEqual(got, want) {
			t.Fatalf("params %+v: got %+v, reference %+v", p, got, want)
		}
		checkWindowInvariants(t, p, got)
	})
}

// checkWindowInvariants checks properties that hold whatever the reference
// implementation does.
func checkWindowInvariants(t *testing.T, p windowParams, r windowResult) {
	t.Helper()
	if len(r.Lines) > p.limit {
		t.Fatalf("%d lines over limit %d", len(r.Lines), p.limit)
	}
	cost := 0
	for i, l := range r.Lines {
		if l.Number != p.offset+i {
			t.Fatalf("line %d numbered %d, offset %d", i, l.Number, p.offset)
		}
		if l.Number > r.Total {
			t.Fatalf("line %d beyond total %d", l.Number, r.Total)
		}
		if !utf8.ValidString(l.Text) {
			t.Fatalf("line %d is invalid UTF-8: %q", l.Number, l.Text)
		}
		cost += len(l.Text)
		if i > 0 {
			cost++
		}
	}
	if cost > p.maxBytes {
		t.Fatalf("output %d bytes over cap %d", cost, p.maxBytes)
	}
}
