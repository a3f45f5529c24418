package toolapi

import (
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// literalEditCase is a successful edit pinned byte for byte to the reference
// implementation.
type literalEditCase struct {
	name               string
	raw                string
	edit               Edit
	out, before, after string
	n                  int
}

// literalEditErrorCase is a rejected edit with the reference implementation's
// exact message.
type literalEditErrorCase struct {
	name    string
	raw     string
	edit    Edit
	display string
	code    versionstore.Code
	msg     string
}

// Sample-boundary fixtures, in UTF-16 units (styleSampleUnits is 4096).
var (
	// crlfByUnits has two CRLFs at units 3000-3003 and three LFs from unit
	// 4504, so the unit-counted sample says CRLF (2 vs 1), while counting
	// code points (LFs at 3504+) or bytes (CRLFs at byte 5000) says LF.
	crlfByUnits = unitsFixture("a\n", "\r\n", "\n")
	// emojiPushesCRLFOut puts two emoji at units 4092-4095, so its CRLF
	// starts at unit 4096, outside the sample; counting code points would see
	// it whole (code points 4094-4095).
	emojiPushesCRLFOut = strings.Repeat("x", 4092) + "😀😀" + "\r\n"
	// crlfStraddles has a CRLF whose CR is unit 4095 and LF unit 4096: only
	// the CR is sampled, so the sample is one CRLF and one LF, a tie.
	crlfStraddles = "a\r\nb\n" + strings.Repeat("x", 4090) + "\r\n"
	// crlfEndsAtBoundary is crlfStraddles shifted one unit left, so the whole
	// second CRLF is sampled and CRLF wins.
	crlfEndsAtBoundary = "a\r\nb\n" + strings.Repeat("x", 4089) + "\r\n"
)

// unitsFixture builds crlfByUnits and its edited forms: head (units 0-1), 1000
// emoji (units 2-2001), 998 x, two of crlf at units 3000-3003, 1500 x, and
// three of lf from unit 4504.
func unitsFixture(head, crlf, lf string) string {
	return head + strings.Repeat("😀", 1000) + strings.Repeat("x", 998) + crlf + crlf +
		strings.Repeat("x", 1500) + lf + lf + lf
}

// literalEditCases also seed FuzzApplyLiteralEdit.
var literalEditCases = []literalEditCase{
	{name: "crlf file, new text with LF", raw: "a\r\nb\r\n", edit: Edit{Old: "b", New: "B\nC"},
		out: "a\r\nB\r\nC\r\n", before: "a\nb\n", after: "a\nB\nC\n", n: 1},
	{name: "crlf majority converts minority LF", raw: "a\r\nb\r\nc\n", edit: Edit{Old: "c", New: "C"},
		out: "a\r\nb\r\nC\r\n", before: "a\nb\nc\n", after: "a\nb\nC\n", n: 1},
	{name: "tie writes LF", raw: "a\r\nb\n", edit: Edit{Old: "a", New: "A"},
		out: "A\nb\n", before: "a\nb\n", after: "A\nb\n", n: 1},
	{name: "CRLF in old is normalized", raw: "x\ny\n", edit: Edit{Old: "x\r\ny", New: "X"},
		out: "X\n", before: "x\ny\n", after: "X\n", n: 1},
	{name: "CRLF old matches CRLF in file", raw: "a\nb\r\nc\n", edit: Edit{Old: "b\r\n", New: ""},
		out: "a\nc\n", before: "a\nb\nc\n", after: "a\nc\n", n: 1},
	{name: "old of only CRLF replaces every line end", raw: "a\r\nb\nc", edit: Edit{Old: "\r\n", New: "|", ReplaceAll: true},
		out: "a|b|c", before: "a\nb\nc", after: "a|b|c", n: 2},
	{name: "CRLF in new is restored in CRLF file", raw: "a\r\nb\r\n", edit: Edit{Old: "b", New: "B\r\nC"},
		out: "a\r\nB\r\nC\r\n", before: "a\nb\n", after: "a\nB\nC\n", n: 1},
	{name: "CRLF in new becomes LF in LF file", raw: "a\nb\n", edit: Edit{Old: "b", New: "B\r\nC"},
		out: "a\nB\nC\n", before: "a\nb\n", after: "a\nB\nC\n", n: 1},
	{name: "replace all counts non-overlapping", raw: "aaa", edit: Edit{Old: "aa", New: "b", ReplaceAll: true},
		out: "ba", before: "aaa", after: "ba", n: 1},
	{name: "non-overlapping single match needs no replace all", raw: "aaa", edit: Edit{Old: "aa", New: "b"},
		out: "ba", before: "aaa", after: "ba", n: 1},
	{name: "empty new deletes", raw: "abc", edit: Edit{Old: "b", New: ""},
		out: "ac", before: "abc", after: "ac", n: 1},
	{name: "crlf round trip", raw: "a\r\nOLD\r\nb\r\n", edit: Edit{Old: "OLD", New: "NEW"},
		out: "a\r\nNEW\r\nb\r\n", before: "a\nOLD\nb\n", after: "a\nNEW\nb\n", n: 1},
	{name: "replace all", raw: "a a a", edit: Edit{Old: "a", New: "b", ReplaceAll: true},
		out: "b b b", before: "a a a", after: "b b b", n: 3},
	{name: "case-sensitive", raw: "Foo foo", edit: Edit{Old: "foo", New: "bar"},
		out: "Foo bar", before: "Foo foo", after: "Foo bar", n: 1},
	{name: "replacement may create a new match", raw: "aabb", edit: Edit{Old: "ab", New: ""},
		out: "ab", before: "aabb", after: "ab", n: 1},
	{name: "lone CR untouched in CRLF file", raw: "a\rb\r\n", edit: Edit{Old: "b", New: "B"},
		out: "a\rB\r\n", before: "a\rb\n", after: "a\rB\n", n: 1},
	{name: "lone CR untouched in LF file", raw: "a\rb\n", edit: Edit{Old: "b", New: "B"},
		out: "a\rB\n", before: "a\rb\n", after: "a\rB\n", n: 1},
	{name: "old lone CR matches lone CR", raw: "a\rb\n", edit: Edit{Old: "\r", New: "-"},
		out: "a-b\n", before: "a\rb\n", after: "a-b\n", n: 1},
	{name: "CR CR LF normalizes in one pass", raw: "a\r\r\nb", edit: Edit{Old: "b", New: "B"},
		out: "a\r\r\nB", before: "a\r\nb", after: "a\r\nB", n: 1},
	{name: "new ending in CR before LF survives in LF file", raw: "a\nb", edit: Edit{Old: "a", New: "a\r"},
		out: "a\r\nb", before: "a\nb", after: "a\r\nb", n: 1},
	{name: "new ending in CR before LF in CRLF file", raw: "a\r\nb\r\n", edit: Edit{Old: "a", New: "a\r"},
		out: "a\r\r\nb\r\n", before: "a\nb\n", after: "a\r\nb\n", n: 1},
	{name: "CRLF file may lose all line ends", raw: "a\r\nb", edit: Edit{Old: "a\nb", New: "ab"},
		out: "ab", before: "a\nb", after: "ab", n: 1},
	{name: "style sampled in UTF-16 units", raw: crlfByUnits, edit: Edit{Old: "a\n", New: "A\n"},
		out:    unitsFixture("A\r\n", "\r\n", "\r\n"),
		before: unitsFixture("a\n", "\n", "\n"), after: unitsFixture("A\n", "\n", "\n"), n: 1},
	{name: "CRLF straddling the sample boundary is a tie", raw: crlfStraddles, edit: Edit{Old: "b", New: "B"},
		out: "a\nB\n" + strings.Repeat("x", 4090) + "\n", before: "a\nb\n" + strings.Repeat("x", 4090) + "\n",
		after: "a\nB\n" + strings.Repeat("x", 4090) + "\n", n: 1},
}

// literalEditErrorCases also seed FuzzApplyLiteralEdit.
var literalEditErrorCases = []literalEditErrorCase{
	{name: "empty old", raw: "abc", edit: Edit{Old: "", New: "x"}, display: "X",
		code: "", msg: "old_string must be a non-empty string"},
	{name: "empty old with replace all on empty file", raw: "", edit: Edit{ReplaceAll: true}, display: "X",
		code: "", msg: "old_string must be a non-empty string"},
	{name: "not found", raw: "a a a", edit: Edit{Old: "x", New: "y"}, display: "X",
		code: versionstore.CodeEditNotFound, msg: `old_string was not found in "X"`},
	{name: "not found in empty file", raw: "", edit: Edit{Old: "a", New: "b"}, display: "X",
		code: versionstore.CodeEditNotFound, msg: `old_string was not found in "X"`},
	{name: "ambiguous", raw: "a a a", edit: Edit{Old: "a", New: "b"}, display: "X",
		code: versionstore.CodeAmbiguousEdit, msg: `old_string matched 3 times in "X"; provide a more specific old_string or set replace_all to true`},
	{name: "ambiguous words", raw: "foo foo foo", edit: Edit{Old: "foo", New: "bar"}, display: "X",
		code: versionstore.CodeAmbiguousEdit, msg: `old_string matched 3 times in "X"; provide a more specific old_string or set replace_all to true`},
	{name: "ambiguous CRLF old", raw: "a\r\nb\r\n", edit: Edit{Old: "\r\n", New: " "}, display: "X",
		code: versionstore.CodeAmbiguousEdit, msg: `old_string matched 2 times in "X"; provide a more specific old_string or set replace_all to true`},
	{name: "case-sensitive miss", raw: "Foo", edit: Edit{Old: "foo", New: "bar"}, display: "X",
		code: versionstore.CodeEditNotFound, msg: `old_string was not found in "X"`},
	{name: "no whitespace fuzz", raw: "a  b", edit: Edit{Old: "a b", New: "ab"}, display: "X",
		code: versionstore.CodeEditNotFound, msg: `old_string was not found in "X"`},
	{name: "lone CR is not a line end", raw: "a\rb", edit: Edit{Old: "a\nb", New: "ab"}, display: "X",
		code: versionstore.CodeEditNotFound, msg: `old_string was not found in "X"`},
	{name: "display is quoted without escaping", raw: "abc", edit: Edit{Old: "z", New: "y"}, display: `dir/ü "q"\t.txt`,
		code: versionstore.CodeEditNotFound, msg: `old_string was not found in "dir/ü "q"\t.txt"`},
}

func TestApplyLiteralEdit(t *testing.T) {
	for _, c := range literalEditCases {
		t.Run(c.name, func(t *testing.T) {
			out, before, after, n, err := applyLiteralEdit(c.raw, c.edit, "X")
			if err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if out != c.out {
				t.Errorf("out = %q, want %q", out, c.out)
			}
			if before != c.before {
				t.Errorf("before = %q, want %q", before, c.before)
			}
			if after != c.after {
				t.Errorf("after = %q, want %q", after, c.after)
			}
			if n != c.n {
				t.Errorf("n = %d, want %d", n, c.n)
			}
		})
	}
}

func TestApplyLiteralEditErrors(t *testing.T) {
	for _, c := range literalEditErrorCases {
		t.Run(c.name, func(t *testing.T) {
			out, before, after, n, err := applyLiteralEdit(c.raw, c.edit, c.display)
			if err == nil {
				t.Fatal("no error")
			}
			if code, msg := errParts(err); code != c.code || msg != c.msg {
				t.Errorf("err = %s %q, want %s %q", code, msg, c.code, c.msg)
			}
			if out != "" || before != "" || after != "" || n != 0 {
				t.Errorf("results = %q, %q, %q, %d; want zero values", out, before, after, n)
			}
		})
	}
}

func TestLiteralDominantCRLF(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want bool
	}{
		{"empty", "", false},
		{"no newlines", "abc", false},
		{"one CRLF", "a\r\n", true},
		{"one LF", "a\n", false},
		{"tie", "a\r\nb\n", false},
		{"majority CRLF", "\r\n\r\n\n", true},
		{"majority LF", "\r\n\n\n", false},
		{"lone CR is no line end", "a\rb\r", false},
		{"CR CR LF is one CRLF", "\r\r\n", true},
		{"CRLF past the sample ignored", "a\n" + strings.Repeat("x", 4094) + "\r\n\r\n", false},
		{"LF past the sample ignored", "a\r\n" + strings.Repeat("x", 4093) + "\n\n", true},
		{"sample counted in UTF-16 units", crlfByUnits, true},
		{"emoji pushes CRLF out of the sample", emojiPushesCRLFOut, false},
		{"emoji straddling the boundary ends the sample", "a\r\n" + strings.Repeat("x", 4092) + "😀\n\n", true},
		{"CRLF straddling the boundary keeps only CR", crlfStraddles, false},
		{"CRLF ending at the boundary counts", crlfEndsAtBoundary, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dominantCRLF(tt.raw); got != tt.want {
				t.Errorf("dominantCRLF = %v, want %v", got, tt.want)
			}
		})
	}
}

// errParts is the code and message the model sees for err.
func errParts(err error) (versionstore.Code, string) {
	r := failure("edit", err)
	return versionstore.Code(r.Error.Code), r.Error.Message
}

// editBytes refuses what is not UTF-8 text anywhere in the file, not only
// in the prefix a read sniffs, and keeps a BOM.
func TestEditBytesText(t *testing.T) {
	lateNUL := strings.Repeat("a", 9000) + "\x00a"
	for _, c := range []struct{ raw, msg string }{
		{lateNUL, `cannot edit "X": binary file`},
		{"a\xffa", `cannot edit "X": invalid UTF-8 text`},
	} {
		_, _, err := editBytes([]byte(c.raw), Edit{Old: "a", New: "b", ReplaceAll: true}, "X")
		if code, msg := errParts(err); code != versionstore.CodeNotText || msg != c.msg {
			t.Errorf("err = %s %q, want FS_NOT_TEXT %q", code, msg, c.msg)
		}
	}
	out, n, err := editBytes([]byte("\ufeffa\r\nb\r\n"), Edit{Old: "a\nb", New: "c\nd"}, "X")
	if err != nil || n != 1 || string(out) != "\ufeffc\r\nd\r\n" {
		t.Fatalf("editBytes = %q, %d, %v", out, n, err)
	}
}
