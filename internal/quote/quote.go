// Package quote writes names — file paths, checkpoint names, a writer's
// process name or actor, mount points — for a person's terminal. Names come
// from whoever made the file or ran the process, the agent under review
// among them: printed raw, a newline in a name forges a line of the log
// and an escape sequence rewrites what is on the screen.
//
// It follows git's quoting of paths (quote_c_style, core.quotePath): a name
// that holds a control character, a double quote, a backslash or bytes that
// are not UTF-8 is printed in double quotes with C escapes ("a/x\ny",
// "\033[2K"); any other name is printed as it is. Unlike git's default,
// printable non-ASCII stays readable (git with core.quotePath=false): a
// name in Japanese or with an accent is the user's own, and octal escapes
// of it help nobody. C1 controls (U+0080–U+009F) are quoted, for some
// terminals act on them as on ESC.
//
// The package only formats text; it never decides what is shown. JSON output
// does not use it (JSON escapes control characters itself), nor does the text
// the model reads, which is the reference implementation's byte for byte
// (docs/reference.md).
package quote

import (
	"strings"
	"unicode/utf8"
)

// Name is name as a terminal may show it: as it is if it is plain, else in
// double quotes with C escapes.
func Name(name string) string {
	if plain(name) {
		return name
	}
	var b strings.Builder
	b.Grow(len(name) + 8)
	b.WriteByte('"')
	escape(&b, name, true)
	b.WriteByte('"')
	return b.String()
}

// Text is free text that may hold names it did not quote (an error message
// from the daemon, a note): its control characters and bytes that are not
// UTF-8 escaped as Name escapes them, without quotes around it. Its double
// quotes and backslashes are its own and are left alone.
func Text(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return isControl(r) || r == utf8.RuneError }) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	escape(&b, s, false)
	return b.String()
}

// plain says name needs no quoting.
func plain(name string) bool {
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && size <= 1 || isControl(r) || r == '"' || r == '\\' {
			return false
		}
		i += size
	}
	return true
}

// isControl says a terminal may act on r: C0, DEL and C1.
func isControl(r rune) bool {
	return r < 0x20 || r >= 0x7f && r <= 0x9f
}

// cEscapes are the escapes git writes by letter; other control bytes are
// written in octal.
var cEscapes = [...]byte{'\a': 'a', '\b': 'b', '\t': 't', '\n': 'n', '\v': 'v', '\f': 'f', '\r': 'r'}

// escape writes s to b with its control characters and invalid bytes
// escaped, and, when quoted, its double quotes and backslashes.
func escape(b *strings.Builder, s string, quoted bool) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1, isControl(r):
			for _, c := range []byte(s[i : i+size]) {
				if int(c) < len(cEscapes) && cEscapes[c] != 0 {
					b.WriteByte('\\')
					b.WriteByte(cEscapes[c])
					continue
				}
				b.WriteByte('\\')
				b.WriteByte('0' + c>>6)
				b.WriteByte('0' + c>>3&7)
				b.WriteByte('0' + c&7)
			}
		case quoted && (r == '"' || r == '\\'):
			b.WriteByte('\\')
			b.WriteByte(byte(r))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
}
