package toolapi

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	windowTestLimit    = 2000
	windowTestMaxLen   = 2000
	windowTestMaxBytes = 51200
	windowTestDisplay  = "/ws/f.txt"
)

// windowParams are the arguments of newWindow.
type windowParams struct {
	offset, limit, maxLen, maxBytes int
}

func defaultWindowParams() windowParams {
	return windowParams{1, windowTestLimit, windowTestMaxLen, windowTestMaxBytes}
}

// windowResult is what Finish returns.
type windowResult struct {
	Lines     []Line
	Total     int
	Truncated bool
}

// feedWindow runs a window over chunks.
func feedWindow(p windowParams, chunks []string) windowResult {
	w := newWindow(p.offset, p.limit, p.maxLen, p.maxBytes)
	for _, c := range chunks {
		w.Write(c)
	}
	lines, total, truncated := w.Finish()
	return windowResult{lines, total, truncated}
}

// splitRuneChunks splits s into chunks of size bytes, each extended to the
// next rune boundary as decoded input would be. Size 1 yields single runes.
func splitRuneChunks(s string, size int) []string {
	var chunks []string
	for s != "" {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		chunks = append(chunks, s[:n])
		s = s[n:]
	}
	return chunks
}

// runWindow feeds text whole, rune by rune, and in 256-byte chunks, fails the
// test unless all three agree, and returns the result.
func runWindow(t *testing.T, text string, p windowParams) windowResult {
	t.Helper()
	want := feedWindow(p, []string{text})
	for _, size := range []int{1, 256} {
		if got := feedWindow(p, splitRuneChunks(text, size)); !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks of %d bytes: got %+v, whole input gave %+v", size, got, want)
		}
	}
	return want
}

// renderWindow runs the window and renders it as a read of windowTestDisplay.
func renderWindow(t *testing.T, text string, p windowParams) string {
	t.Helper()
	r := runWindow(t, text, p)
	return renderRead(windowTestDisplay, p.offset, p.limit, r.Lines, r.Total)
}

func wrapReadBody(body string) string {
	return "<path>" + windowTestDisplay + "</path>\n<type>file</type>\n<content>\n" + body + "\n</content>"
}

func TestWindowRenderGolden(t *testing.T) {
	tenLines := "line one\nline two\nline three\nline four\nline five\n" +
		"line six\nline seven\nline eight\nline nine\nline ten"
	tests := []struct {
		name   string
		text   string
		modify func(*windowParams)
		body   string
	}{
		{"empty", "", nil, "(End of file - total 0 lines)"},
		{"lone newline", "\n", nil, "1: \n\n(End of file - total 1 lines)"},
		{"two lines", "hello\nworld", nil, "1: hello\n2: world\n\n(End of file - total 2 lines)"},
		{
			"offset and limit", "l1\nl2\nl3\nl4\nl5",
			func(p *windowParams) { p.offset, p.limit = 2, 2 },
			"2: l2\n3: l3\n\n(Showing lines 2-3 of 5. Use offset=4 to continue.)",
		},
		{
			"byte cap", "aaaa\nbbbb\ncccc",
			func(p *windowParams) { p.maxBytes = 9 },
			"1: aaaa\n2: bbbb\n\n(Output capped. Showing lines 1-2. Use offset=3 to continue.)",
		},
		{
			"first line over byte cap", "aaaaaaaaaa",
			func(p *windowParams) { p.maxBytes = 4 },
			"(Output capped. Showing lines 1-0. Use offset=1 to continue.)",
		},
		{
			"long line", "abcdefgh",
			func(p *windowParams) { p.maxLen = 4 },
			"1: abcd... (line truncated to 4 chars)\n\n(End of file - total 1 lines)",
		},
		{
			"limit", "a\nb\nc\nd",
			func(p *windowParams) { p.limit = 2 },
			"1: a\n2: b\n\n(Showing lines 1-2 of 4. Use offset=3 to continue.)",
		},
		{
			"offset with limit", "a\nb\nc\nd",
			func(p *windowParams) { p.offset, p.limit = 2, 2 },
			"2: b\n3: c\n\n(Showing lines 2-3 of 4. Use offset=4 to continue.)",
		},
		{
			"middle of ten", tenLines,
			func(p *windowParams) { p.offset, p.limit = 5, 4 },
			"5: line five\n6: line six\n7: line seven\n8: line eight\n\n" +
				"(Showing lines 5-8 of 10. Use offset=9 to continue.)",
		},
		{
			"limit reaches end", "a\nb\n",
			func(p *windowParams) { p.limit = 2 },
			"1: a\n2: b\n\n(End of file - total 2 lines)",
		},
		{
			"single line", "x",
			nil,
			"1: x\n\n(End of file - total 1 lines)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := defaultWindowParams()
			if tt.modify != nil {
				tt.modify(&p)
			}
			if got, want := renderWindow(t, tt.text, p), wrapReadBody(tt.body); got != want {
				t.Errorf("got\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func TestWindowRenderExactHelloWorld(t *testing.T) {
	const want = "<path>/ws/f.txt</path>\n<type>file</type>\n<content>\n" +
		"1: hello\n2: world\n\n(End of file - total 2 lines)\n</content>"
	if got := renderWindow(t, "hello\nworld", defaultWindowParams()); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	const empty = "<path>/ws/f.txt</path>\n<type>file</type>\n<content>\n" +
		"(End of file - total 0 lines)\n</content>"
	if got := renderWindow(t, "", defaultWindowParams()); got != empty {
		t.Errorf("got %q, want %q", got, empty)
	}
}

// lineTexts returns the text of each line.
func lineTexts(lines []Line) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, l.Text)
	}
	return out
}

func TestWindowLines(t *testing.T) {
	long5000 := strings.Repeat("x", 5000)
	tests := []struct {
		name      string
		text      string
		maxLen    int
		want      []string
		total     int
		truncated bool
	}{
		{"empty", "", 2000, []string{}, 0, false},
		{"lone newline", "\n", 2000, []string{""}, 1, false},
		{"trailing newline", "a\nb\n", 2000, []string{"a", "b"}, 2, false},
		{"blank lines", "\n\n\n", 2000, []string{"", "", ""}, 3, false},
		{"crlf", "a\r\nb\r\n", 2000, []string{"a", "b"}, 2, false},
		{"cr after last newline", "a\n\r", 2000, []string{"a", ""}, 2, false},
		{"only one cr stripped", "a\r\r\nb", 2000, []string{"a\r", "b"}, 2, false},
		{"inner cr kept", "a\rb", 2000, []string{"a\rb"}, 1, false},
		{"exactly max", "abcd", 4, []string{"abcd"}, 1, false},
		{"max plus one", "abcde", 4, []string{"abcd... (line truncated to 4 chars)"}, 1, false},
		{"max plus cr", "abcd\r\n", 4, []string{"abcd"}, 1, false},
		{"max plus one plus cr", "abcde\r", 4, []string{"abcd... (line truncated to 4 chars)"}, 1, false},
		// The reference implementation strips '\r' from the line capped at
		// max+1 units, so a '\r' right after the cut hides the truncation.
		{"cr at cap quirk", "abcd\rXYZ", 4, []string{"abcd"}, 1, false},
		{"cr at cap quirk crlf", "abcd\rXYZ\r\nq", 4, []string{"abcd", "q"}, 2, false},
		{"cr past cap", "abcde\rXYZ", 4, []string{"abcd... (line truncated to 4 chars)"}, 1, false},
		{"surrogate split dropped", "ab😀cd", 3, []string{"ab... (line truncated to 3 chars)"}, 1, false},
		{"surrogate ends at cut", "a😀cd", 3, []string{"a😀... (line truncated to 3 chars)"}, 1, false},
		{"surrogate exactly fits", "a😀", 3, []string{"a😀"}, 1, false},
		{"surrogate at cap", "abc😀", 3, []string{"abc... (line truncated to 3 chars)"}, 1, false},
		{"surrogate at cap then cr", "ab😀\r", 3, []string{"ab... (line truncated to 3 chars)"}, 1, false},
		{"surrogate then cr at cap", "a😀\rzz", 3, []string{"a😀"}, 1, false},
		{"bmp multibyte counts one", "éèêë", 4, []string{"éèêë"}, 1, false},
		{"bmp multibyte truncated", "éèêëe", 4, []string{"éèêë... (line truncated to 4 chars)"}, 1, false},
		{"5000 chars", long5000 + "\nend", 2000,
			[]string{strings.Repeat("x", 2000) + "... (line truncated to 2000 chars)", "end"}, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := defaultWindowParams()
			p.maxLen = tt.maxLen
			r := runWindow(t, tt.text, p)
			if got := lineTexts(r.Lines); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
			if r.Total != tt.total || r.Truncated != tt.truncated {
				t.Errorf("total, truncated = %d, %v; want %d, %v", r.Total, r.Truncated, tt.total, tt.truncated)
			}
			for i, l := range r.Lines {
				if l.Number != i+1 {
					t.Errorf("line %d numbered %d", i+1, l.Number)
				}
			}
		})
	}
}

func TestWindowByteCap(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		maxBytes  int
		want      []string
		total     int
		truncated bool
	}{
		// Costs: 4, then 1+4 per further line.
		{"exactly at cap", "aaaa\nbbbb", 9, []string{"aaaa", "bbbb"}, 2, false},
		{"one over cap", "aaaa\nbbbb", 8, []string{"aaaa"}, 2, true},
		{"later lines still counted", "aaaa\nbbbb\ncccc\n\n\nd", 9, []string{"aaaa", "bbbb"}, 6, true},
		// A short line after the refused one is not shown either.
		{"stops at first refusal", "a\nbbbbbbbb\nc", 4, []string{"a"}, 3, true},
		{"first line over cap", "aaaaaaaaaa", 4, []string{}, 1, true},
		{"multibyte counted in bytes", "éé", 3, []string{}, 1, true},
		{"marker counted", "abcdefgh", 35, []string{"abcd... (line truncated to 4 chars)"}, 1, false},
		{"marker over cap", "abcdefgh", 34, []string{}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := defaultWindowParams()
			p.maxBytes, p.maxLen = tt.maxBytes, 4
			r := runWindow(t, tt.text, p)
			if got := lineTexts(r.Lines); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
			if r.Total != tt.total || r.Truncated != tt.truncated {
				t.Errorf("total, truncated = %d, %v; want %d, %v", r.Total, r.Truncated, tt.total, tt.truncated)
			}
		})
	}
}

func TestWindowOffsetPastEnd(t *testing.T) {
	// The caller reports out-of-range offsets; the window just shows nothing.
	p := defaultWindowParams()
	p.offset = 10
	r := runWindow(t, "a\nb\n", p)
	if len(r.Lines) != 0 || r.Total != 2 || r.Truncated {
		t.Errorf("got %+v", r)
	}
}

func TestWindowNoLinesIsEmptyNotNil(t *testing.T) {
	// Callers may marshal the lines; the reference implementation gives []
	// rather than null.
	for _, text := range []string{"", "too long for the cap"} {
		p := defaultWindowParams()
		p.maxBytes = 4
		if r := runWindow(t, text, p); r.Lines == nil || len(r.Lines) != 0 {
			t.Errorf("%q: lines = %#v, want empty non-nil", text, r.Lines)
		}
	}
}

func TestWindowInvalidUTF8StaysValid(t *testing.T) {
	// Input is meant to be valid, but a stray byte must not leak into the
	// model-facing text as invalid UTF-8.
	r := feedWindow(defaultWindowParams(), []string{"a\xffb\n"})
	if got := lineTexts(r.Lines); !reflect.DeepEqual(got, []string{"a\uFFFDb"}) {
		t.Errorf("lines = %q", got)
	}
}

func TestWindowChunkInvarianceLongLine(t *testing.T) {
	text := strings.Repeat("0123456789", 500) + "\r\n" + strings.Repeat("é😀", 1500) + "\nshort\r\n"
	p := defaultWindowParams()
	want := feedWindow(p, []string{text})
	for _, size := range []int{1, 2, 3, 7, 256, 4096} {
		if got := feedWindow(p, splitRuneChunks(text, size)); !reflect.DeepEqual(got, want) {
			t.Errorf("chunks of %d bytes differ from whole input", size)
		}
	}
	if got := lineTexts(want.Lines); len(got) != 3 ||
		got[0] != strings.Repeat("0123456789", 200)+"... (line truncated to 2000 chars)" ||
		got[1] != strings.Repeat("é😀", 666)+"é... (line truncated to 2000 chars)" ||
		got[2] != "short" {
		t.Errorf("lines = %q", got)
	}
}

func TestWindowLongLineBoundedMemory(t *testing.T) {
	const chunkSize = 64 << 10
	const total = 50 << 20
	chunk := strings.Repeat("abcdefgh", chunkSize/8)
	p := defaultWindowParams()
	w := newWindow(p.offset, p.limit, p.maxLen, p.maxBytes)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range total / chunkSize {
		w.Write(chunk)
		// UTF-8 needs at most 3 bytes per UTF-16 unit.
		if c := cap(w.buf); c > 4*(p.maxLen+1) {
			t.Fatalf("line buffer grew to %d bytes", c)
		}
	}
	w.Write("\n")
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("allocated %d bytes for a %d-byte line", alloc, total)
	}

	lines, n, truncated := w.Finish()
	want := chunk[:p.maxLen] + "... (line truncated to 2000 chars)"
	if n != 1 || truncated || len(lines) != 1 || lines[0].Text != want {
		t.Errorf("got %d lines, total %d, truncated %v", len(lines), n, truncated)
	}
}

func TestRenderReadFooters(t *testing.T) {
	tests := []struct {
		name          string
		offset, limit int
		lines         []Line
		total         int
		footer        string
	}{
		{"end of file", 1, 2000, []Line{{1, "a"}}, 1, "(End of file - total 1 lines)"},
		{"limit reached", 1, 1, []Line{{1, "a"}}, 3, "(Showing lines 1-1 of 3. Use offset=2 to continue.)"},
		{"capped", 1, 5, []Line{{1, "a"}}, 3, "(Output capped. Showing lines 1-1. Use offset=2 to continue.)"},
		{"capped before any line", 3, 5, nil, 4, "(Output capped. Showing lines 3-2. Use offset=3 to continue.)"},
		{"empty", 1, 2000, nil, 0, "(End of file - total 0 lines)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderRead(windowTestDisplay, tt.offset, tt.limit, tt.lines, tt.total)
			if !strings.HasSuffix(got, tt.footer+"\n</content>") {
				t.Errorf("got %q, want footer %q", got, tt.footer)
			}
		})
	}
}

// BenchmarkWindow reads 10 MiB of 80-byte lines in 64 KiB chunks.
func BenchmarkWindow(b *testing.B) {
	line := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 2)[:79] + "\n"
	text := strings.Repeat(line, (10<<20)/len(line))
	chunks := splitRuneChunks(text, 64<<10)
	b.Run("all-lines-shown", func(b *testing.B) {
		// Every line is kept, so every byte goes through the line scanner.
		benchmarkWindow(b, text, chunks, windowParams{1, len(text), windowTestMaxLen, len(text) * 2})
	})
	b.Run("default-limits", func(b *testing.B) {
		// The usual case: a few lines kept, then the rest only counted.
		benchmarkWindow(b, text, chunks, defaultWindowParams())
	})
}

func benchmarkWindow(b *testing.B, text string, chunks []string, p windowParams) {
	wantTotal := strings.Count(text, "\n")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		w := newWindow(p.offset, p.limit, p.maxLen, p.maxBytes)
		for _, c := range chunks {
			w.Write(c)
		}
		if _, n, _ := w.Finish(); n != wantTotal {
			b.Fatalf("counted %d lines, want %d", n, wantTotal)
		}
	}
}
