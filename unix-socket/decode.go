package unixsocket

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dshfs/dshfs/toolapi"
)

// decodeToolResult decodes a tool call's answer in one pass: the text is
// unescaped, the value kept raw (an object or array is found by matching
// brackets, not checked: the daemon encoded it),
// the rest decoded normally. encoding/json validates the whole answer and
// then decodes it — two passes over a read's 10 KB that cost more than the
// read itself. Anything unexpected falls back to encoding/json, so the
// result is always what json.Unmarshal would give for a well-formed answer.
func decodeToolResult(b []byte, out *ToolResult) error {
	var r ToolResult
	if fastToolResult(b, &r) {
		*out = r
		return nil
	}
	return json.Unmarshal(b, out)
}

// fastToolResult reports whether it decoded b.
func fastToolResult(b []byte, r *ToolResult) bool {
	p := parser{b: b}
	if !p.byte('{') {
		return false
	}
	if p.peekIs('}') {
		p.i++
		return p.end()
	}
	var seen [4]bool // text, is_error, error, value: a repeat takes the slow path
	for {
		key, ok := p.plainString()
		if !ok || !p.byte(':') {
			return false
		}
		if i := slices.Index([]string{"text", "is_error", "error", "value"}, key); i >= 0 {
			if seen[i] {
				return false
			}
			seen[i] = true
		}
		for _, k := range [...]string{"text", "is_error", "error", "value"} {
			if key != k && strings.EqualFold(key, k) {
				return false // encoding/json matches keys regardless of case
			}
		}
		switch key {
		case "text":
			if r.Text, ok = p.str(); !ok {
				return false
			}
		case "is_error":
			if r.IsError, ok = p.boolean(); !ok {
				return false
			}
		case "error":
			raw, ok := p.skip()
			if !ok {
				return false
			}
			if string(raw) != "null" {
				r.Error = new(toolapi.ErrorInfo)
				if json.Unmarshal(raw, r.Error) != nil {
					return false
				}
			}
		case "value":
			raw, ok := p.skip()
			if !ok {
				return false
			}
			if raw[0] != '{' && raw[0] != '[' && !json.Valid(raw) {
				return false
			}
			r.Value = json.RawMessage(raw) // as json.RawMessage keeps it, "null" too
		default:
			if raw, ok := p.skip(); !ok || !json.Valid(raw) {
				return false
			}
		}
		p.ws()
		if p.peekIs(',') {
			p.i++
			continue
		}
		return p.byte('}') && p.end()
	}
}

type parser struct {
	b []byte
	i int
}

func (p *parser) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\n' || p.b[p.i] == '\t' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *parser) peekIs(c byte) bool {
	p.ws()
	return p.i < len(p.b) && p.b[p.i] == c
}

func (p *parser) byte(c byte) bool {
	if !p.peekIs(c) {
		return false
	}
	p.i++
	return true
}

func (p *parser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// plainString reads a string without escapes (the keys).
func (p *parser) plainString() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return string(p.b[start : p.i-1]), true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// str reads a JSON string, unescaping it as encoding/json does (invalid
// UTF-8 and lone surrogates become U+FFFD).
func (p *parser) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	// The common case: no escapes, valid UTF-8.
	for p.i < len(p.b) {
		if p.i = plainRunAt(p.b, p.i); p.i == len(p.b) {
			break
		}
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			if utf8.Valid(s) {
				return string(s), true
			}
			return "", false
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.i++
	}
	// The unescaped string is no longer than its escaped form, which ends
	// at the first quote no backslash escapes.
	end := p.i
	for {
		j := bytes.IndexByte(p.b[end:], '"')
		if j < 0 {
			return "", false
		}
		end += j
		if escapedQuote(p.b, end) {
			end++
			continue
		}
		break
	}
	// A Builder's String does not copy.
	var buf strings.Builder
	buf.Grow(end - start)
	buf.Write(p.b[start:p.i])
	for p.i < len(p.b) {
		j := p.i
		for j < len(p.b) {
			if j = plainRunAt(p.b, j); j == len(p.b) || p.b[j] == '"' || p.b[j] == '\\' || p.b[j] < 0x20 {
				break
			}
			j++
		}
		buf.Write(p.b[p.i:j]) // the run up to the next escape
		p.i = j
		if j == len(p.b) || p.b[j] < 0x20 {
			return "", false
		}
		if p.b[j] == '"' {
			p.i++
			if !utf8.ValidString(buf.String()) {
				return "", false
			}
			return buf.String(), true
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			buf.WriteByte(e)
		case 'b':
			buf.WriteByte('\b')
		case 'f':
			buf.WriteByte('\f')
		case 'n':
			buf.WriteByte('\n')
		case 'r':
			buf.WriteByte('\r')
		case 't':
			buf.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					r2, ok := p.hex4()
					if !ok {
						return "", false
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						buf.WriteRune(d)
						continue
					}
					p.i = save
				}
				r = utf8.RuneError
			}
			buf.WriteRune(r)
		default:
			return "", false
		}
	}
	return "", false
}

func (p *parser) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}

func (p *parser) boolean() (bool, bool) {
	p.ws()
	switch {
	case len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "true":
		p.i += 4
		return true, true
	case len(p.b)-p.i >= 5 && string(p.b[p.i:p.i+5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// skip passes over one value and returns its bytes: strings are skipped
// escape-aware, brackets matched. The bytes are not otherwise checked.
func (p *parser) skip() ([]byte, bool) {
	p.ws()
	start := p.i
	depth := 0
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			for {
				j := bytes.IndexByte(p.b[p.i:], '"')
				if j < 0 {
					return nil, false
				}
				p.i += j
				if !escapedQuote(p.b, p.i) {
					break
				}
				p.i++
			}
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 {
				return p.scalar(start)
			}
			depth--
		case c == ',' && depth == 0:
			return p.scalar(start)
		}
		p.i++
		if depth == 0 && (c == '}' || c == ']' || c == '"') {
			return p.b[start:p.i], true
		}
	}
	if depth == 0 {
		return p.scalar(start)
	}
	return nil, false
}

// escapedQuote reports whether the quote at b[i] is escaped: preceded by an
// odd number of backslashes.
func escapedQuote(b []byte, i int) bool {
	n := 0
	for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
		n++
	}
	return n%2 == 1
}

// scalar is the number, true, false or null that ends before p.i.
func (p *parser) scalar(start int) ([]byte, bool) {
	end := p.i
	for end > start && (p.b[end-1] == ' ' || p.b[end-1] == '\n' || p.b[end-1] == '\t' || p.b[end-1] == '\r') {
		end--
	}
	return p.b[start:end], end > start
}
