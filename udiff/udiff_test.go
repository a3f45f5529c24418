package udiff

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// seq returns the lines lo..hi, one number per line, with line i replaced
// by repl[i] when present (which may be several lines, or none).
func seq(lo, hi int, repl map[int]string) string {
	var sb strings.Builder
	for i := lo; i <= hi; i++ {
		if s, ok := repl[i]; ok {
			sb.WriteString(s)
			continue
		}
		fmt.Fprintf(&sb, "%d\n", i)
	}
	return sb.String()
}

// The expected outputs below were checked against GNU diffutils 3.8,
// "diff -U<context> --label old --label new".
func TestUnified(t *testing.T) {
	tests := []struct {
		name    string
		a, b    string
		context int
		want    string
	}{
		{
			name: "equal",
			a:    "a\nb\nc\n", b: "a\nb\nc\n", context: 3,
			want: "",
		},
		{
			name: "both empty",
			a:    "", b: "", context: 3,
			want: "",
		},
		{
			name: "one-line change in the middle",
			a:    seq(1, 10, nil), b: seq(1, 10, map[int]string{5: "five\n"}), context: 3,
			want: `--- old
+++ new
@@ -2,7 +2,7 @@
 2
 3
 4
-5
+five
 6
 7
 8
`,
		},
		{
			name: "insertion at top",
			a:    seq(1, 5, nil), b: "0\n" + seq(1, 5, nil), context: 3,
			want: `--- old
+++ new
@@ -1,3 +1,4 @@
+0
 1
 2
 3
`,
		},
		{
			name: "deletion at end",
			a:    seq(1, 5, nil), b: seq(1, 4, nil), context: 3,
			want: `--- old
+++ new
@@ -2,4 +2,3 @@
 2
 3
 4
-5
`,
		},
		{
			name: "no trailing newline in old",
			a:    "a\nb\nc", b: "a\nb\nc\n", context: 3,
			want: `--- old
+++ new
@@ -1,3 +1,3 @@
 a
 b
-c
\ No newline at end of file
+c
`,
		},
		{
			name: "no trailing newline in new",
			a:    "a\nb\nc\n", b: "a\nb\nc", context: 3,
			want: `--- old
+++ new
@@ -1,3 +1,3 @@
 a
 b
-c
+c
\ No newline at end of file
`,
		},
		{
			name: "no trailing newline in both, last line changed",
			a:    "a\nb\nc", b: "a\nb\nd", context: 3,
			want: `--- old
+++ new
@@ -1,3 +1,3 @@
 a
 b
-c
\ No newline at end of file
+d
\ No newline at end of file
`,
		},
		{
			name: "no trailing newline in both, last line is context",
			a:    "a\nb\nc", b: "x\nb\nc", context: 3,
			want: `--- old
+++ new
@@ -1,3 +1,3 @@
-a
+x
 b
 c
\ No newline at end of file
`,
		},
		{
			name: "empty old",
			a:    "", b: "a\nb\n", context: 3,
			want: `--- old
+++ new
@@ -0,0 +1,2 @@
+a
+b
`,
		},
		{
			name: "empty new",
			a:    "a\nb\n", b: "", context: 3,
			want: `--- old
+++ new
@@ -1,2 +0,0 @@
-a
-b
`,
		},
		{
			name: "empty old, new without trailing newline",
			a:    "", b: "a", context: 3,
			want: `--- old
+++ new
@@ -0,0 +1 @@
+a
\ No newline at end of file
`,
		},
		{
			name: "two hunks far apart",
			a:    seq(1, 20, nil), b: seq(1, 20, map[int]string{3: "c\n", 17: "q\n"}), context: 3,
			want: `--- old
+++ new
@@ -1,6 +1,6 @@
 1
 2
-3
+c
 4
 5
 6
@@ -14,7 +14,7 @@
 14
 15
 16
-17
+q
 18
 19
 20
`,
		},
		{
			name: "two changes 2*context apart merge",
			a:    seq(1, 20, nil), b: seq(1, 20, map[int]string{5: "e\n", 12: "l\n"}), context: 3,
			want: `--- old
+++ new
@@ -2,14 +2,14 @@
 2
 3
 4
-5
+e
 6
 7
 8
 9
 10
 11
-12
+l
 13
 14
 15
`,
		},
		{
			name: "two changes 2*context+1 apart stay separate",
			a:    seq(1, 20, nil), b: seq(1, 20, map[int]string{5: "e\n", 13: "m\n"}), context: 3,
			want: `--- old
+++ new
@@ -2,7 +2,7 @@
 2
 3
 4
-5
+e
 6
 7
 8
@@ -10,7 +10,7 @@
 10
 11
 12
-13
+m
 14
 15
 16
`,
		},
		{
			name: "zero context",
			a:    seq(1, 6, nil), b: seq(1, 6, map[int]string{2: "", 5: "5\nx\n"}), context: 0,
			want: `--- old
+++ new
@@ -2 +1,0 @@
-2
@@ -5,0 +5 @@
+x
`,
		},
		{
			name: "negative context is zero",
			a:    seq(1, 6, nil), b: seq(1, 6, map[int]string{2: "", 5: "5\nx\n"}), context: -1,
			want: `--- old
+++ new
@@ -2 +1,0 @@
-2
@@ -5,0 +5 @@
+x
`,
		},
		{
			name: "one line of context",
			a:    seq(1, 6, nil), b: seq(1, 6, map[int]string{2: "", 5: "5\nx\n"}), context: 1,
			want: `--- old
+++ new
@@ -1,3 +1,2 @@
 1
-2
 3
@@ -5,2 +4,3 @@
 5
+x
 6
`,
		},
		{
			name: "binary differ",
			a:    "a\x00b", b: "a\x00c", context: 3,
			want: "Binary files old and new differ\n",
		},
		{
			name: "binary on one side only",
			a:    "text\n", b: "\x00", context: 3,
			want: "Binary files old and new differ\n",
		},
		{
			name: "binary equal",
			a:    "a\x00b", b: "a\x00b", context: 3,
			want: "",
		},
		{
			name: "NUL beyond the sniff window is text",
			a:    strings.Repeat("x", binarySniffLen) + "\n\x00\n",
			b:    strings.Repeat("x", binarySniffLen) + "\ny\n", context: 0,
			want: "--- old\n+++ new\n@@ -2 +2 @@\n-\x00\n+y\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Unified("old", "new", []byte(tc.a), []byte(tc.b), tc.context)
			if got != tc.want {
				t.Errorf("Unified(%q, %q, %d):\ngot:\n%s\nwant:\n%s", tc.a, tc.b, tc.context, got, tc.want)
			}
			if got != "" && !strings.HasPrefix(got, "Binary") {
				if err := checkPatch(got, tc.a, tc.b, max(tc.context, 0)); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestHunkRange pins the GNU range conventions directly.
func TestHunkRange(t *testing.T) {
	tests := []struct {
		start, n int
		want     string
	}{
		{0, 0, "0,0"},
		{4, 0, "4,0"},
		{0, 1, "1"},
		{9, 1, "10"},
		{0, 3, "1,3"},
		{9, 7, "10,7"},
	}
	for _, tc := range tests {
		if got := hunkRange(tc.start, tc.n); got != tc.want {
			t.Errorf("hunkRange(%d, %d) = %q, want %q", tc.start, tc.n, got, tc.want)
		}
	}
}

// randomText returns up to maxLines lines over a small alphabet, so that
// many lines match; the final newline is sometimes missing.
func randomText(r *rand.Rand, maxLines, alphabet int) string {
	n := r.IntN(maxLines + 1)
	var sb strings.Builder
	for i := range n {
		sb.WriteByte(byte('a' + r.IntN(alphabet)))
		if i < n-1 || r.IntN(4) != 0 {
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// mutate returns a copy of s's lines with a few random edits, so that
// the two sides are similar, as in real use.
func mutate(r *rand.Rand, s string, alphabet int) string {
	lines := splitLines([]byte(s))
	for range r.IntN(5) {
		line := string(rune('a'+r.IntN(alphabet))) + "\n"
		i := r.IntN(len(lines) + 1)
		switch r.IntN(3) {
		case 0:
			lines = append(lines[:i], append([]string{line}, lines[i:]...)...)
		case 1:
			if i < len(lines) {
				lines = append(lines[:i], lines[i+1:]...)
			}
		case 2:
			if i < len(lines) {
				lines[i] = line
			}
		}
	}
	// Keep a missing final newline missing, or drop one sometimes.
	out := strings.Join(lines, "")
	if r.IntN(5) == 0 {
		out = strings.TrimSuffix(out, "\n")
	}
	return out
}

func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(20240611, 7))
	for i := range 5000 {
		alphabet := 2 + r.IntN(4)
		a := randomText(r, 30, alphabet)
		var b string
		if r.IntN(2) == 0 {
			b = randomText(r, 30, alphabet)
		} else {
			b = mutate(r, a, alphabet)
		}
		context := r.IntN(5)
		got := Unified("old", "new", []byte(a), []byte(b), context)
		if (got == "") != (a == b) {
			t.Fatalf("case %d: Unified(%q, %q) = %q; empty iff equal violated", i, a, b, got)
		}
		if a == b {
			continue
		}
		if err := checkPatch(got, a, b, context); err != nil {
			t.Fatalf("case %d: a=%q b=%q context=%d: %v\ndiff:\n%s", i, a, b, context, err, got)
		}

		// Myers must find a minimal edit script.
		x, y := splitLines([]byte(a)), splitLines([]byte(b))
		if got, want := editCost(diffLines(x, y, maxEditDistance, 0)), minEditCost(x, y); got != want {
			t.Fatalf("case %d: a=%q b=%q: edit cost %d, minimal is %d", i, a, b, got, want)
		}

		// The bounded fallback must stay correct whatever the bounds.
		fb := renderString("old", "new", x, y, diffLines(x, y, r.IntN(4), r.IntN(12)), context)
		if err := checkPatch(fb, a, b, context); err != nil {
			t.Fatalf("case %d (fallback): a=%q b=%q context=%d: %v\ndiff:\n%s", i, a, b, context, err, fb)
		}
	}
}

func TestLargeFewChanges(t *testing.T) {
	const n = 100_000
	lines := make([]string, n)
	for i := range lines {
		lines[i] = "line " + strconv.Itoa(i) + "\n"
	}
	a := strings.Join(lines, "")
	// Ten changes spread over the file: replacements, insertions, deletions.
	for j := range 10 {
		i := (j*2+1)*n/20 + j*37
		switch j % 3 {
		case 0:
			lines[i] = "changed " + strconv.Itoa(i) + "\n"
		case 1:
			lines[i] = lines[i] + "inserted\n"
		case 2:
			lines[i] = ""
		}
	}
	b := strings.Join(lines, "")

	got := Unified("old", "new", []byte(a), []byte(b), 3)
	if err := checkPatch(got, a, b, 3); err != nil {
		t.Fatal(err)
	}
	if h := strings.Count(got, "\n@@ "); h != 10 {
		t.Errorf("got %d hunks, want 10:\n%s", h, got)
	}
}

// A large file with many scattered one-line changes diffs as exactly
// those changes: one hunk each, nothing else replaced. This is why dshfs
// keeps its own diff (docs/dependencies.md): go-udiff's approximate LCS,
// on this input, stops matching after about 1,250 lines and replaces the
// remaining 17,000 wholesale, ten times the diff.
func TestLargeManyChanges(t *testing.T) {
	const n, every = 20_000, 50
	var sa, sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sa, "line %d of the file\n", i)
		if i%every == 0 {
			fmt.Fprintf(&sb, "changed %d\n", i)
		} else {
			fmt.Fprintf(&sb, "line %d of the file\n", i)
		}
	}
	got := Unified("old", "new", []byte(sa.String()), []byte(sb.String()), 3)
	if err := checkPatch(got, sa.String(), sb.String(), 3); err != nil {
		t.Fatal(err)
	}
	removed, added := strings.Count(got, "\n-line "), strings.Count(got, "\n+changed ")
	if h := strings.Count(got, "\n@@ "); h != n/every || removed != n/every || added != n/every {
		t.Errorf("%d hunks, %d lines removed, %d added; want %d of each", h, removed, added, n/every)
	}
}

func TestLargeFallback(t *testing.T) {
	// Two large, entirely different middles exceed the Myers bound and
	// take the fallback; the result must still be a correct patch.
	var sa, sb strings.Builder
	sa.WriteString("head\n")
	sb.WriteString("head\n")
	for i := range 3 * maxEditDistance {
		fmt.Fprintf(&sa, "a%d\n", i)
		fmt.Fprintf(&sb, "b%d\n", i)
	}
	sa.WriteString("tail\n")
	sb.WriteString("tail\n")
	a, b := sa.String(), sb.String()

	x, y := splitLines([]byte(a)), splitLines([]byte(b))
	edits := diffLines(x, y, maxEditDistance, 0)
	want := []edit{{1, 1 + 3*maxEditDistance, 1, 1 + 3*maxEditDistance}}
	if len(edits) != 1 || edits[0] != want[0] {
		t.Errorf("diffLines = %v, want %v", edits, want)
	}
	if err := checkPatch(Unified("old", "new", []byte(a), []byte(b), 3), a, b, 3); err != nil {
		t.Fatal(err)
	}
}

// Inputs over the line limit are not diffed: Write says how long they are
// and writes nothing. Equal or binary inputs need no lines and are answered
// as always.
func TestWriteTooLong(t *testing.T) {
	lim := Limits{MaxLines: 3}
	var sb strings.Builder
	err := Write(&sb, "old", "new", []byte("1\n2\n3\n4\n"), []byte("1\n2\n3\n4\n5"), 3, lim)
	var long *TooLongError
	if !errors.As(err, &long) || *long != (TooLongError{OldLines: 4, NewLines: 5, MaxLines: 3}) || sb.Len() != 0 {
		t.Fatalf("Write = %v (%+v), wrote %q; want a TooLongError of 4 and 5 lines, nothing written", err, long, sb.String())
	}
	long4 := []byte("1\n2\n3\n4\n")
	for _, tc := range []struct{ a, b []byte }{{long4, long4}, {long4, []byte("\x00")}} {
		sb.Reset()
		if err := Write(&sb, "old", "new", tc.a, tc.b, 3, lim); err != nil || sb.String() != Unified("old", "new", tc.a, tc.b, 3) {
			t.Errorf("Write(%q, %q) = %v, %q; want Unified's answer", tc.a, tc.b, err, sb.String())
		}
	}
	if err := Write(&sb, "old", "new", []byte("1\n2\n3"), []byte("1\n2\n4"), 3, lim); err != nil {
		t.Errorf("Write of 3 lines = %v, want a diff", err)
	}
}

// A search over its cost bound replaces the middle wholesale, and the
// patch is still correct; the default bound is far above a real file's
// diff, which comes out as without a bound.
func TestCostBound(t *testing.T) {
	var sa, sb strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&sa, "line %d\n", i)
		if i%50 == 0 {
			fmt.Fprintf(&sb, "changed %d\n", i)
		} else {
			fmt.Fprintf(&sb, "line %d\n", i)
		}
	}
	a, b := sa.String(), sb.String()
	var out strings.Builder
	if err := Write(&out, "old", "new", []byte(a), []byte(b), 3, DefaultLimits); err != nil || out.String() != Unified("old", "new", []byte(a), []byte(b), 3) {
		t.Fatalf("Write with the default limits = %v, and a diff other than Unified's", err)
	}
	out.Reset()
	if err := Write(&out, "old", "new", []byte(a), []byte(b), 3, Limits{MaxCost: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := checkPatch(out.String(), a, b, 3); err != nil {
		t.Fatal(err)
	}
	if h := strings.Count(out.String(), "\n@@ "); h != 1 {
		t.Errorf("%d hunks; want one wholesale hunk", h)
	}
}

// failAfter takes n bytes, then fails every write.
type failAfter struct {
	n, writes int
}

var errFull = errors.New("full")

func (f *failAfter) Write(p []byte) (int, error) {
	f.writes++
	if len(p) > f.n {
		f.n = 0
		return 0, errFull
	}
	f.n -= len(p)
	return len(p), nil
}

// A writer that takes no more ends the diff: Write returns its error and
// does not call it again.
func TestWriteStopsAtTheWritersError(t *testing.T) {
	a := seq(1, 200_000, nil)
	b := seq(1, 200_000, map[int]string{1: "one\n", 200_000: "last\n"})
	w := &failAfter{n: 100 << 10}
	// All of it context: one hunk of 200,000 lines.
	if err := Write(w, "old", "new", []byte(a), []byte(b), 1<<30, DefaultLimits); !errors.Is(err, errFull) {
		t.Fatalf("Write = %v, want %v", err, errFull)
	}
	if w.writes != 2 {
		t.Errorf("%d writes of 64 KiB; want the first, and the one that failed", w.writes)
	}
}

func editCost(edits []edit) int {
	n := 0
	for _, e := range edits {
		n += e.a1 - e.a0 + e.b1 - e.b0
	}
	return n
}

// minEditCost is the insert/delete edit distance by dynamic programming.
func minEditCost(x, y []string) int {
	prev := make([]int, len(y)+1)
	cur := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			if x[i-1] == y[j-1] {
				cur[j] = prev[j-1]
			} else {
				cur[j] = 1 + min(prev[j], cur[j-1])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(y)]
}

// checkPatch applies the unified diff d to a, checks that the result is b,
// and checks the diff's shape: headers, hunk ranges, exactly context lines
// of context where the file allows, and hunks merged exactly when their
// changes are at most 2*context equal lines apart.
func checkPatch(d, a, b string, context int) error {
	const header = "--- old\n+++ new\n"
	if !strings.HasPrefix(d, header) {
		return fmt.Errorf("missing header in %q", d)
	}
	old := splitLines([]byte(a))
	dl := strings.SplitAfter(strings.TrimPrefix(d, header), "\n")
	if dl[len(dl)-1] != "" {
		return fmt.Errorf("diff does not end in a newline")
	}
	dl = dl[:len(dl)-1]

	var out []string
	pos := 0            // next unread line of old
	lastChangeEnd := -1 // old index just past the previous hunk's last change
	for i := 0; i < len(dl); {
		var oldStart, oldCount, newStart, newCount int
		h := strings.TrimSuffix(dl[i], "\n")
		i++
		f := strings.Fields(h)
		if len(f) != 4 || f[0] != "@@" || f[3] != "@@" || f[1][0] != '-' || f[2][0] != '+' {
			return fmt.Errorf("bad hunk header %q", h)
		}
		var err error
		if oldStart, oldCount, err = parseRange(f[1][1:]); err != nil {
			return err
		}
		if newStart, newCount, err = parseRange(f[2][1:]); err != nil {
			return err
		}
		if oldStart < pos || (lastChangeEnd >= 0 && oldStart == pos) {
			return fmt.Errorf("hunk %q overlaps or touches the previous one", h)
		}
		if oldStart > len(old) {
			return fmt.Errorf("hunk %q starts past the end", h)
		}
		out = append(out, old[pos:oldStart]...)
		pos = oldStart
		if newStart != len(out) {
			return fmt.Errorf("hunk %q: new start should be %d", h, len(out))
		}

		var oldSeen, newSeen int
		firstChange, changeEnd := -1, -1 // old indexes of this hunk's changes
		run := 0                         // current run of context lines
		for oldSeen < oldCount || newSeen < newCount {
			if i >= len(dl) {
				return fmt.Errorf("hunk %q is truncated", h)
			}
			line := dl[i]
			i++
			kind, text := line[0], line[1:]
			if i < len(dl) && dl[i] == "\\ No newline at end of file\n" {
				text = strings.TrimSuffix(text, "\n")
				i++
			}
			switch kind {
			case ' ', '-':
				if pos >= len(old) || old[pos] != text {
					return fmt.Errorf("hunk %q: line %q does not match old line %d", h, line, pos+1)
				}
				pos++
				oldSeen++
				if kind == ' ' {
					out = append(out, text)
					newSeen++
					run++
					continue
				}
			case '+':
				out = append(out, text)
				newSeen++
			default:
				return fmt.Errorf("hunk %q: bad line %q", h, line)
			}
			// A change line: check the context run before it.
			start := pos
			if kind == '-' {
				start--
			}
			if firstChange < 0 {
				firstChange = start
				if run > context || (run < context && oldStart != 0) {
					return fmt.Errorf("hunk %q has %d leading context lines", h, run)
				}
				if lastChangeEnd >= 0 && firstChange-lastChangeEnd <= 2*context {
					return fmt.Errorf("hunk %q should have merged with the previous one", h)
				}
			} else if run > 2*context {
				return fmt.Errorf("hunk %q should have been split", h)
			}
			changeEnd = pos
			run = 0
		}
		if oldSeen != oldCount || newSeen != newCount {
			return fmt.Errorf("hunk %q: counted -%d +%d lines", h, oldSeen, newSeen)
		}
		if firstChange < 0 {
			return fmt.Errorf("hunk %q has no changes", h)
		}
		if run > context || (run < context && pos != len(old)) {
			return fmt.Errorf("hunk %q has %d trailing context lines", h, run)
		}
		lastChangeEnd = changeEnd
	}
	if lastChangeEnd < 0 {
		return fmt.Errorf("diff has no hunks")
	}
	out = append(out, old[pos:]...)
	if got := strings.Join(out, ""); got != b {
		return fmt.Errorf("patched result %q, want %q", got, b)
	}
	return nil
}

// parseRange parses "l" or "l,s" and returns the 0-based start and count.
func parseRange(s string) (start, count int, err error) {
	ls, cs, found := strings.Cut(s, ",")
	l, err := strconv.Atoi(ls)
	if err != nil {
		return 0, 0, fmt.Errorf("bad range %q", s)
	}
	count = 1
	if found {
		if count, err = strconv.Atoi(cs); err != nil {
			return 0, 0, fmt.Errorf("bad range %q", s)
		}
		if count == 1 {
			return 0, 0, fmt.Errorf("range %q should be written without \",1\"", s)
		}
	}
	if count == 0 {
		return l, 0, nil
	}
	if l < 1 {
		return 0, 0, fmt.Errorf("bad range %q", s)
	}
	return l - 1, count, nil
}

// renderString is render's output as a string.
func renderString(oldName, newName string, x, y []string, edits []edit, c int) string {
	var sb strings.Builder
	out := &output{w: bufio.NewWriter(&sb)}
	render(out, oldName, newName, x, y, edits, c)
	out.flush()
	return sb.String()
}
