package toolapi

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// The literal edit: the reference implementation's matching, line-ending and
// BOM rules. They are tool semantics, so they live here; the store only runs
// them under its lock, through Update.

// bom is the UTF-8 byte order mark, kept by an edit.
var bom = []byte{0xEF, 0xBB, 0xBF}

// Edit is one literal replacement request.
type Edit struct {
	Old        string
	New        string
	ReplaceAll bool
}

// styleSampleUnits is how much of a file the reference implementation inspects
// to pick its line-ending style. It is measured in UTF-16 code units because
// the reference implementation slices a JavaScript string.
const styleSampleUnits = 4096

// applyLiteralEdit applies e to raw, the decoded text of a file with any
// leading UTF-8 BOM already removed. It returns the text to write back (line
// endings restored to the file's dominant style, no BOM), the LF-normalized
// text before and after the edit, and the number of replacements. display is
// the path shown in messages.
//
// Matching is purely literal and case-sensitive on the LF-normalized text;
// Old and New are normalized the same way, so a CRLF in either matches or
// produces an LF.
func applyLiteralEdit(raw string, e Edit, display string) (out, before, after string, n int, err error) {
	old := normalizeNewlines(e.Old)
	if old == "" {
		return "", "", "", 0, errEmptyOld()
	}
	before = normalizeNewlines(raw)
	n = strings.Count(before, old)
	if err = checkMatchCount(n, e.ReplaceAll, display); err != nil {
		return "", "", "", 0, err
	}
	after = strings.ReplaceAll(before, old, normalizeNewlines(e.New))
	return restoreNewlines(after, dominantCRLF(raw)), before, after, n, nil
}

// checkMatchCount rejects an edit whose old text is missing, or matches more
// than once without ReplaceAll, with the reference implementation's exact
// messages.
func checkMatchCount(n int, replaceAll bool, display string) error {
	switch {
	case n == 0:
		return errEditNotFound(display)
	case n > 1 && !replaceAll:
		return errAmbiguousEdit(n, display)
	}
	return nil
}

// editBytes is e applied to raw, the bytes of a file: refused unless they
// are UTF-8 text, a leading BOM kept, line endings in the file's dominant
// style. n is the number of replacements.
func editBytes(raw []byte, e Edit, display string) (out []byte, n int, err error) {
	if bytes.IndexByte(raw, 0) >= 0 {
		return nil, 0, errNotText("edit", display, true)
	}
	if !utf8.Valid(raw) {
		return nil, 0, errNotText("edit", display, false)
	}
	text, hasBOM := bytes.CutPrefix(raw, bom)
	edited, _, _, n, err := applyLiteralEdit(string(text), e, display)
	if err != nil {
		return nil, 0, err
	}
	if hasBOM {
		return append(append([]byte(nil), bom...), edited...), n, nil
	}
	return []byte(edited), n, nil
}

// normalizeNewlines turns every CRLF into LF and leaves lone CRs alone. Like
// the reference implementation's single left-to-right pass, "\r\r\n" becomes
// "\r\n".
func normalizeNewlines(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// restoreNewlines writes LF-normalized text back in the file's style. In CRLF
// style every LF becomes CRLF, so a mixed file's minority endings convert too.
func restoreNewlines(s string, crlf bool) string {
	if !crlf {
		return s
	}
	return strings.ReplaceAll(s, "\n", "\r\n")
}

// dominantCRLF reports whether CRLF endings outnumber bare LF endings in the
// sample the reference implementation inspects. A tie, or no newlines at all,
// means LF.
func dominantCRLF(raw string) bool {
	sample := styleSample(raw)
	crlf := strings.Count(sample, "\r\n")
	lf := strings.Count(sample, "\n") - crlf
	return crlf > lf
}

// styleSample is the prefix of s holding every rune that starts before
// UTF-16 unit styleSampleUnits: the bytes the reference implementation's
// text.slice(0, 4096) covers. A supplementary rune takes two units, and one
// straddling the boundary is kept whole, which cannot affect newline counts.
// A CRLF straddling the boundary keeps only its CR.
func styleSample(s string) string {
	units := 0
	for i, r := range s {
		if units >= styleSampleUnits {
			return s[:i]
		}
		units++
		if r >= 0x10000 {
			units++
		}
	}
	return s
}
