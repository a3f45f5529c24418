package toolapi

import (
	"bytes"
	"unicode/utf8"
)

// What makes a file text for read: no NUL byte in its first binarySniff
// bytes, valid UTF-8 throughout; one leading BOM is not shown. The store
// hands read the file's raw chunks (versionstore.Store.Read); textDecoder
// turns them into the text a window shows.

// binarySniff is how many leading bytes a read checks for NUL.
const binarySniff = 8192

// textDecoder feeds sink the text of a file read chunk by chunk, whole
// runes only, and refuses a file that is not text (errNotText). It holds
// back the first binarySniff bytes until it has them all (or the file's
// end), so a NUL among them is found before anything is shown.
type textDecoder struct {
	display string
	sink    func(string)
	carry   []byte // bytes not handed on yet: the head, or a rune cut short
	started bool   // the head is checked and its BOM dropped
}

// feed takes the next chunk of the file; last marks its end.
func (d *textDecoder) feed(chunk []byte, last bool) error {
	data := chunk
	if len(d.carry) > 0 {
		d.carry = append(d.carry, chunk...)
		data = d.carry
	}
	if !d.started {
		if len(data) < binarySniff && !last {
			d.carry = append(d.carry[:0], data...)
			return nil
		}
		if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
			return errNotText("read", d.display, true)
		}
		data, d.started = bytes.TrimPrefix(data, bom), true
	}
	end := len(data)
	if !last {
		end = completePrefix(data)
	}
	if !utf8.Valid(data[:end]) {
		return errNotText("read", d.display, false)
	}
	if end > 0 {
		d.sink(string(data[:end]))
	}
	d.carry = append(d.carry[:0], data[end:]...)
	return nil
}

// completePrefix is the length of the longest prefix of b that does not end
// inside a multi-byte sequence that more input could complete.
func completePrefix(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		c := b[i]
		if c < utf8.RuneSelf {
			return len(b)
		}
		if utf8.RuneStart(c) {
			if need := seqLen(c); need > 0 && i+need > len(b) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}

// seqLen is the length of the UTF-8 sequence a lead byte announces (0 if none).
func seqLen(c byte) int {
	switch {
	case c&0xE0 == 0xC0:
		return 2
	case c&0xF0 == 0xE0:
		return 3
	case c&0xF8 == 0xF0:
		return 4
	}
	return 0
}
