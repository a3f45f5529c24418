package versionstore

import (
	"strconv"
	"strings"
)

// Edit is one literal replacement request.
type Edit struct {
	Old        string
	New        string
	ReplaceAll bool
}

// styleSampleUnits is how much of a file the reference inspects to pick its
// line-ending style. It is measured in UTF-16 code units because the
// reference slices a JavaScript string.
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
		return "", "", "", 0, &Error{Code: CodeEditNotFound, Message: "old_string must be a non-empty string"}
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
// than once without ReplaceAll, with the reference's exact messages.
func checkMatchCount(n int, replaceAll bool, display string) error {
	switch {
	case n == 0:
		return &Error{Code: CodeEditNotFound, Message: "old_string was not found in " + quote(display)}
	case n > 1 && !replaceAll:
		return &Error{Code: CodeAmbiguousEdit, Message: "old_string matched " + strconv.Itoa(n) + " times in " + quote(display) +
			"; provide a more specific old_string or set replace_all to true"}
	}
	return nil
}

// normalizeNewlines turns every CRLF into LF and leaves lone CRs alone. Like
// the reference's single left-to-right pass, "\r\r\n" becomes "\r\n".
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
// sample the reference inspects. A tie, or no newlines at all, means LF.
func dominantCRLF(raw string) bool {
	sample := styleSample(raw)
	crlf := strings.Count(sample, "\r\n")
	lf := strings.Count(sample, "\n") - crlf
	return crlf > lf
}

// styleSample is the prefix of s holding every rune that starts before
// UTF-16 unit styleSampleUnits: the bytes the reference's
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
