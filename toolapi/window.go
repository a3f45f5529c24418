package toolapi

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Line is one numbered line of a read window.
type Line struct {
	Number int    `json:"number"`
	Text   string `json:"text"`
}

// window builds the visible part of a text file in one pass over its decoded
// chunks.
//
// It ports the reference implementation's buildWindow byte for byte, because the
// model sees its output. Lengths are therefore measured in UTF-16 code units,
// as in JavaScript, and each line is only scanned up to maxLineLength+1 units
// so that memory stays bounded however long a line is.
type window struct {
	offset, limit, maxLineLength, maxBytes int

	lines       []Line
	totalLines  int
	outputBytes int
	truncated   bool // a line was refused for exceeding maxBytes

	// State of the current (not yet flushed) line.
	pending bool   // the line has at least one character
	buf     []byte // UTF-8 of its first maxLineLength units, whole runes only
	units   int    // UTF-16 length of the capped line, at most maxLineLength+1
	lastCR  bool   // the last unit of the capped line is '\r'
}

// newWindow returns a window showing at most limit lines starting at the
// 1-based line offset, each cut to maxLineLength UTF-16 units, stopping before
// the output exceeds maxBytes.
func newWindow(offset, limit, maxLineLength, maxBytes int) *window {
	return &window{
		offset:        offset,
		limit:         limit,
		maxLineLength: max(maxLineLength, 0),
		maxBytes:      maxBytes,
	}
}

// Write feeds the next chunk of decoded text. Chunks are valid UTF-8 and split
// only at rune boundaries, but may split lines (and "\r\n") anywhere.
func (w *window) Write(chunk string) {
	if w.full() {
		w.countOnly(chunk)
		return
	}
	for {
		i := strings.IndexByte(chunk, '\n')
		if i < 0 {
			w.extend(chunk)
			return
		}
		w.extend(chunk[:i])
		w.flush()
		chunk = chunk[i+1:]
		if w.full() {
			w.countOnly(chunk)
			return
		}
	}
}

// Finish flushes the last line and returns the result.
func (w *window) Finish() (lines []Line, totalLines int, truncatedByBytes bool) {
	// A trailing "\n" ends the last line rather than starting an empty one.
	if w.pending {
		w.flush()
	}
	if w.lines == nil {
		// Encode as [] rather than null in JSON, like the reference
		// implementation.
		w.lines = []Line{}
	}
	return w.lines, w.totalLines, w.truncated
}

// full reports whether no further line can be shown, so that the rest of the
// input only needs its lines counted.
func (w *window) full() bool {
	return w.truncated || len(w.lines) >= w.limit
}

// countOnly advances over chunk without building any line text.
func (w *window) countOnly(chunk string) {
	n := strings.Count(chunk, "\n")
	w.totalLines += n
	if n > 0 {
		w.pending = false
	}
	if !strings.HasSuffix(chunk, "\n") && chunk != "" {
		w.pending = true
	}
}

// wanted reports whether the current line can appear in the output, so its
// text is worth collecting. Only flushes change the answer, so it holds for
// the whole line.
func (w *window) wanted() bool {
	return !w.full() && w.totalLines+1 >= w.offset
}

// extend appends a piece of the current line that contains no '\n'.
func (w *window) extend(s string) {
	if s == "" {
		return
	}
	w.pending = true
	if !w.wanted() {
		return
	}
	// Units past maxLineLength+1 can never be shown nor change the result.
	for s != "" && w.units <= w.maxLineLength {
		if n := asciiPrefix(s, w.maxLineLength+1-w.units); n > 0 {
			w.addASCII(s[:n])
			s = s[n:]
			continue
		}
		r, size := utf8.DecodeRuneInString(s)
		w.addRune(r, s[:size])
		s = s[size:]
	}
}

// asciiPrefix returns the length of the longest ASCII prefix of s, at most n.
func asciiPrefix(s string, n int) int {
	n = min(n, len(s))
	for i := 0; i < n; i++ {
		if s[i] >= utf8.RuneSelf {
			return i
		}
	}
	return n
}

// addASCII appends ASCII text that fits in the capped line. ASCII is one byte
// per unit, so it is copied in bulk.
func (w *window) addASCII(s string) {
	room := w.maxLineLength - w.units // >= 0: extend stops at the cap
	w.buf = append(w.buf, s[:min(len(s), room)]...)
	w.units += len(s)
	w.lastCR = s[len(s)-1] == '\r'
}

// addRune appends one non-ASCII rune, whose UTF-8 encoding is enc, to the
// capped line.
func (w *window) addRune(r rune, enc string) {
	n := 1
	if r >= 0x10000 {
		n = 2 // a surrogate pair in UTF-16
	}
	if w.units+n <= w.maxLineLength {
		if r == utf8.RuneError && len(enc) == 1 {
			// Invalid input: substitute as a UTF-8 decoder would, so the
			// output stays valid UTF-8.
			enc = string(utf8.RuneError)
		}
		w.buf = append(w.buf, enc...)
	}
	// A rune that crosses maxLineLength is kept out of buf (we never split a
	// character) but still counts towards the capped length, which is then
	// over the limit and marks the line as truncated.
	w.units = min(w.units+n, w.maxLineLength+1)
	w.lastCR = false // r is not ASCII, so not '\r'
}

// flush ends the current line.
func (w *window) flush() {
	w.totalLines++
	if !w.truncated && w.totalLines >= w.offset && len(w.lines) < w.limit {
		w.emit(w.lineText())
	}
	w.pending = false
	w.buf = w.buf[:0]
	w.units = 0
	w.lastCR = false
}

// lineText returns the current line as shown: without one trailing '\r' and
// cut to maxLineLength units.
//
// Like the reference implementation, the '\r' is stripped from the capped line.
// For a line longer than maxLineLength+1 units this looks at unit
// maxLineLength, and if that is a '\r' the line is shown cut to maxLineLength
// units with no truncation marker. This quirk is deliberate, to match the
// reference implementation.
func (w *window) lineText() string {
	units, text := w.units, w.buf
	if w.lastCR {
		units--
		if units < w.maxLineLength {
			// The '\r' is inside buf, as its last byte.
			text = text[:len(text)-1]
		}
	}
	if units > w.maxLineLength {
		return string(text) + "... (line truncated to " + strconv.Itoa(w.maxLineLength) + " chars)"
	}
	return string(text)
}

// emit adds a shown line unless it would push the output past maxBytes, in
// which case the window stops taking lines.
func (w *window) emit(text string) {
	cost := len(text)
	if len(w.lines) > 0 {
		cost++ // the "\n" joining it to the previous line
	}
	if w.outputBytes+cost > w.maxBytes {
		w.truncated = true
		return
	}
	w.lines = append(w.lines, Line{Number: w.totalLines, Text: text})
	w.outputBytes += cost
}

// renderRead formats the model-facing text of a read.
func renderRead(display string, offset, limit int, lines []Line, totalLines int) string {
	var b strings.Builder
	b.WriteString("<path>")
	b.WriteString(display)
	b.WriteString("</path>\n<type>file</type>\n<content>\n")
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strconv.Itoa(l.Number))
		b.WriteString(": ")
		b.WriteString(l.Text)
	}
	if len(lines) > 0 {
		b.WriteString("\n\n")
	}
	b.WriteString(readFooter(offset, limit, lines, totalLines))
	b.WriteString("\n</content>")
	return b.String()
}

// readFooter tells the model where the window ended and how to continue.
func readFooter(offset, limit int, lines []Line, totalLines int) string {
	endLine := max(0, offset-1)
	if len(lines) > 0 {
		endLine = lines[len(lines)-1].Number
	}
	next := strconv.Itoa(endLine + 1)
	shown := strconv.Itoa(offset) + "-" + strconv.Itoa(endLine)
	switch {
	case len(lines) < limit && endLine < totalLines:
		// Fewer lines than asked for, yet more remain: the byte cap hit.
		return "(Output capped. Showing lines " + shown + ". Use offset=" + next + " to continue.)"
	case endLine < totalLines:
		return "(Showing lines " + shown + " of " + strconv.Itoa(totalLines) + ". Use offset=" + next + " to continue.)"
	default:
		return "(End of file - total " + strconv.Itoa(totalLines) + " lines)"
	}
}
