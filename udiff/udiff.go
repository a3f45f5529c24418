// Package udiff renders line-based unified diffs of two in-memory byte
// slices, in the format produced by GNU "diff -u" and git.
//
// The package owns only the diff computation (Myers' O(ND) algorithm with
// a bounded fallback) and its textual rendering. It never touches files:
// callers supply both contents and the names printed in the header. It
// never words anything for people beyond the diff format itself: inputs
// too long to diff are an error (*TooLongError) the caller words.
package udiff

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unsafe"
)

const (
	// binarySniffLen is how much of each input is searched for a NUL byte
	// to decide that the content is binary (the same window git uses).
	binarySniffLen = 8000

	// maxEditDistance bounds the Myers search. Beyond it the cost in time
	// (O((N+M)·D)) and memory (O(D²) for the trace) is no longer worth a
	// minimal diff, and a simple but correct diff is produced instead. It
	// can only trigger when the differing middles hold more than this many
	// lines in total, since D never exceeds N+M.
	maxEditDistance = 4096
)

// Limits bound the work of one diff, so that no pair of inputs makes a
// diff take time or memory out of proportion to what a person can read.
// A zero field is no bound.
type Limits struct {
	// MaxLines: when either input has more lines, nothing is diffed and
	// Write returns a *TooLongError. Below it, a diff holds a few words
	// per line (the lines' bounds, their interned numbers).
	MaxLines int
	// MaxCost bounds Myers' search, counted in diagonals visited plus
	// lines compared: beyond it, as beyond an edit distance of 4096, the
	// differing middle is replaced wholesale.
	MaxCost int
}

// DefaultLimits are far above any source file (the largest single C files
// in common use, SQLite's amalgamation, have about 260,000 lines; a Myers
// search over two such files costs a few million), and keep a diff under
// a second and about 100 MiB besides its inputs.
var DefaultLimits = Limits{MaxLines: 500_000, MaxCost: 1 << 27}

// TooLongError is returned by Write for inputs over Limits.MaxLines lines:
// they differ, and nothing was written.
type TooLongError struct {
	OldLines, NewLines int
	MaxLines           int
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("diff of %d and %d lines: over %d lines", e.OldLines, e.NewLines, e.MaxLines)
}

// Unified returns the unified diff of a and b with context lines of context,
// headed "--- oldName\n+++ newName\n", or "" when a and b are equal. It
// bounds nothing but the edit distance: Write with DefaultLimits is for
// inputs of any size.
//
// Lines are split on "\n". A final line without a trailing newline is
// followed by "\\ No newline at end of file", as GNU diff does. If either
// input contains a NUL byte in its first 8000 bytes, the inputs are treated
// as binary and the result is "Binary files oldName and newName differ\n".
// A negative context is treated as zero.
func Unified(oldName, newName string, a, b []byte, context int) string {
	var sb strings.Builder
	Write(&sb, oldName, newName, a, b, context, Limits{})
	return sb.String()
}

// Write writes the unified diff of a and b to w, as Unified returns it,
// within lim. It returns a *TooLongError, before writing anything, for
// inputs over lim.MaxLines lines, and stops at the first error of w.
func Write(w io.Writer, oldName, newName string, a, b []byte, context int, lim Limits) error {
	if bytes.Equal(a, b) {
		return nil
	}
	if isBinary(a) || isBinary(b) {
		_, err := io.WriteString(w, "Binary files "+oldName+" and "+newName+" differ\n")
		return err
	}
	if na, nb := countLines(a), countLines(b); lim.MaxLines > 0 && max(na, nb) > lim.MaxLines {
		return &TooLongError{OldLines: na, NewLines: nb, MaxLines: lim.MaxLines}
	}
	if context < 0 {
		context = 0
	}
	x, y := splitLines(a), splitLines(b)
	edits := diffLines(x, y, maxEditDistance, lim.MaxCost)
	out := &output{w: bufio.NewWriterSize(w, 64<<10)}
	render(out, oldName, newName, x, y, edits, context)
	return out.flush()
}

// output is where render writes: the first error of the writer below
// sticks, and render stops at it (a reader that wants no more, or a client
// that went away, ends the rendering of a long diff).
type output struct {
	w   *bufio.Writer
	err error
}

func (o *output) WriteString(s string) {
	if o.err == nil {
		_, o.err = o.w.WriteString(s)
	}
}

func (o *output) WriteByte(c byte) error {
	if o.err == nil {
		o.err = o.w.WriteByte(c)
	}
	return o.err
}

func (o *output) flush() error {
	if o.err == nil {
		o.err = o.w.Flush()
	}
	return o.err
}

// countLines is how many lines splitLines makes of p, without making them.
func countLines(p []byte) int {
	n := bytes.Count(p, []byte{'\n'})
	if len(p) > 0 && p[len(p)-1] != '\n' {
		n++
	}
	return n
}

// isBinary reports whether p looks like binary content.
func isBinary(p []byte) bool {
	if len(p) > binarySniffLen {
		p = p[:binarySniffLen]
	}
	return bytes.IndexByte(p, 0) >= 0
}

// splitLines splits p into lines, each keeping its trailing "\n" except
// possibly the last. The lines are p's own bytes, not a copy (a diff of
// two 64 MiB versions would otherwise hold them twice): p must not change
// while they are in use, and nothing that refers to them outlives Write,
// whose output is written, that is copied.
func splitLines(p []byte) []string {
	if len(p) == 0 {
		return nil
	}
	s := unsafe.String(unsafe.SliceData(p), len(p))
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	lines := make([]string, 0, n)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// edit replaces lines x[a0:a1] with y[b0:b1]. An edit script is a sorted
// list of non-adjacent edits; the lines between consecutive edits (and
// before the first and after the last) are equal on both sides.
type edit struct {
	a0, a1, b0, b1 int
}

// diffLines returns an edit script turning x into y. Common prefix and
// suffix are trimmed first; the middle is diffed with Myers' algorithm, or,
// if its edit distance exceeds maxD or the search costs more than maxCost
// (0: no bound), replaced wholesale.
func diffLines(x, y []string, maxD, maxCost int) []edit {
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	xm, ym := x[pre:len(x)-suf], y[pre:len(y)-suf]
	if len(xm) == 0 && len(ym) == 0 {
		return nil
	}

	// Intern lines so that the inner loop compares integers.
	ids := make(map[string]int32, len(xm)+len(ym))
	intern := func(lines []string) []int32 {
		out := make([]int32, len(lines))
		for i, l := range lines {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	xi, yi := intern(xm), intern(ym)

	edits, ok := myers(xi, yi, maxD, maxCost)
	if !ok {
		edits = []edit{{0, len(xm), 0, len(ym)}}
	}
	for i := range edits {
		edits[i].a0 += pre
		edits[i].a1 += pre
		edits[i].b0 += pre
		edits[i].b1 += pre
	}
	return edits
}

// myers computes a minimal edit script turning a into b using the greedy
// O((N+M)·D) algorithm from Eugene W. Myers, "An O(ND) Difference Algorithm
// and Its Variations" (1986), keeping the per-step frontier for the
// backtrack. It reports false if the edit distance exceeds maxD, or if the
// diagonals visited and lines compared exceed maxCost (0: no bound): the
// trace is O(maxD²), but the time is O((N+M)·D), and only the cost bounds
// it for long inputs.
func myers(a, b []int32, maxD, maxCost int) ([]edit, bool) {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return []edit{{0, n, 0, m}}, true
	}
	limit := min(n+m, maxD)
	// v[off+k] is the furthest x reached on diagonal k = x-y, or -1 when
	// no path in bounds reaches that diagonal.
	off := limit + 1
	v := make([]int, 2*limit+3)
	for i := range v {
		v[i] = -1
	}
	// trace[d][(k+d)/2] is v[off+k] after step d, for k = -d, -d+2, ..., d.
	trace := make([][]int32, 0, 64)
	cost := 0
	for d := 0; d <= limit; d++ {
		snap := make([]int32, d+1)
		for k := -d; k <= d; k += 2 {
			x := -1
			if k >= -m && k <= n {
				if d == 0 {
					x = 0
				} else {
					x, _ = step(k, d, n, m, func(k int) int { return v[off+k] })
				}
				if x >= 0 {
					x0, y := x, x-k
					for x < n && y < m && a[x] == b[y] {
						x++
						y++
					}
					cost += x - x0
				}
			}
			if cost++; maxCost > 0 && cost > maxCost {
				return nil, false
			}
			v[off+k] = x
			snap[(k+d)/2] = int32(x)
			if x == n && x-k == m {
				trace = append(trace, snap)
				return backtrack(trace, n, m), true
			}
		}
		trace = append(trace, snap)
	}
	return nil, false
}

// step picks the move onto diagonal k at step d > 0, given prev, the
// furthest x reached on each diagonal at step d-1 (-1 if none). It returns
// the x reached by the move (before following any snake), or -1, and
// whether the move is downward (an insertion) rather than rightward (a
// deletion). Moves that leave the n×m grid are never chosen. On a tie the
// downward move wins, as in Myers' paper.
func step(k, d, n, m int, prev func(k int) int) (x int, down bool) {
	x = -1
	if k+1 <= d-1 {
		if px := prev(k + 1); px >= 0 && px-k <= m {
			x, down = px, true
		}
	}
	if k-1 >= -(d - 1) {
		if px := prev(k - 1); px >= 0 && px+1 <= n && px+1 > x {
			x, down = px+1, false
		}
	}
	return x, down
}

// backtrack walks the trace from (n, m) back to (0, 0) and returns the
// edit script, with adjacent single-line edits coalesced.
func backtrack(trace [][]int32, n, m int) []edit {
	var rev []edit // edits in reverse order
	add := func(e edit) {
		if l := len(rev) - 1; l >= 0 && rev[l].a0 == e.a1 && rev[l].b0 == e.b1 {
			rev[l].a0, rev[l].b0 = e.a0, e.b0
			return
		}
		rev = append(rev, e)
	}
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		prevSnap := trace[d-1]
		prev := func(k int) int {
			if k < -(d-1) || k > d-1 {
				return -1
			}
			return int(prevSnap[(k+d-1)/2])
		}
		k := x - y
		_, down := step(k, d, n, m, prev)
		pk := k - 1
		if down {
			pk = k + 1
		}
		px := prev(pk)
		py := px - pk
		if down {
			add(edit{px, px, py, py + 1})
		} else {
			add(edit{px, px + 1, py, py})
		}
		x, y = px, py
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// render writes the edit script as unified diff hunks with c lines of
// context. Hunks whose changes are at most 2c equal lines apart are merged.
// It stops at the first error of sb.
func render(sb *output, oldName, newName string, x, y []string, edits []edit, c int) {
	if len(edits) == 0 {
		return
	}
	sb.WriteString("--- " + oldName + "\n+++ " + newName + "\n")
	for i := 0; i < len(edits); {
		j := i
		for j+1 < len(edits) && edits[j+1].a0-edits[j].a1 <= 2*c {
			j++
		}
		first, last := edits[i], edits[j]
		a0 := max(first.a0-c, 0)
		b0 := first.b0 - (first.a0 - a0)
		a1 := min(last.a1+c, len(x))
		b1 := last.b1 + (a1 - last.a1)

		sb.WriteString("@@ -" + hunkRange(a0, a1-a0) + " +" + hunkRange(b0, b1-b0) + " @@\n")
		ai := a0
		for _, e := range edits[i : j+1] {
			writeLines(sb, ' ', x[ai:e.a0])
			writeLines(sb, '-', x[e.a0:e.a1])
			writeLines(sb, '+', y[e.b0:e.b1])
			ai = e.a1
		}
		writeLines(sb, ' ', x[ai:a1])
		if sb.err != nil {
			return
		}
		i = j + 1
	}
}

// writeLines writes lines with prefix, until sb fails.
func writeLines(sb *output, prefix byte, lines []string) {
	for _, l := range lines {
		if sb.err != nil {
			return
		}
		writeLine(sb, prefix, l)
	}
}

// hunkRange formats a hunk range starting at 0-based line start with n
// lines, following GNU conventions: "l" when n is 1, "l,n" otherwise, and
// for an empty range l is the line before the hunk.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return strconv.Itoa(start) + ",0"
	case 1:
		return strconv.Itoa(start + 1)
	default:
		return strconv.Itoa(start+1) + "," + strconv.Itoa(n)
	}
}

// writeLine writes one diff line with its prefix, marking a missing
// trailing newline the way GNU diff does.
func writeLine(sb *output, prefix byte, line string) {
	sb.WriteByte(prefix)
	sb.WriteString(line)
	if !strings.HasSuffix(line, "\n") {
		sb.WriteString("\n\\ No newline at end of file\n")
	}
}
