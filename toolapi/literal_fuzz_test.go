package toolapi

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dshfs/dshfs/versionstore"
)

// maxLiteralSeedLen keeps the multi-kilobyte boundary fixtures out of the
// corpus: the fuzzer's input minimization is quadratic in input length and
// stalls every worker on them. boundaryPad reaches the boundary instead.
const maxLiteralSeedLen = 256

// FuzzApplyLiteralEdit checks applyLiteralEdit against oracles built from the
// reference implementation's definitions rather than from its implementation.
// Each input is also checked behind boundaryPad, so the 4096-unit style sample
// ends inside it.
func FuzzApplyLiteralEdit(f *testing.F) {
	for _, c := range literalEditCases {
		if len(c.raw) <= maxLiteralSeedLen {
			f.Add(c.raw, c.edit.Old, c.edit.New, c.edit.ReplaceAll)
		}
	}
	for _, c := range literalEditErrorCases {
		f.Add(c.raw, c.edit.Old, c.edit.New, c.edit.ReplaceAll)
	}
	f.Add("a\r\nb\nc\r\nd\n\r\n", "b", "B", false)
	f.Add("😀\r\n😀\n\r\r\n", "\n", "\r\n", true)
	f.Fuzz(func(t *testing.T, raw, old, newText string, replaceAll bool) {
		// raw is decoded text in production, so invalid UTF-8 never reaches it.
		if !utf8.ValidString(raw) || !utf8.ValidString(old) || !utf8.ValidString(newText) {
			t.Skip()
		}
		e := Edit{Old: old, New: newText, ReplaceAll: replaceAll}
		checkFuzzEdit(t, raw, e)
		// An old made only of pad runes would match thousands of times in
		// the pad and blow the output up by len(New) each; any other old
		// needs a byte of raw in every match, so padding adds at most one.
		if strings.Trim(strings.ReplaceAll(old, "\r\n", "\n"), boundaryPadRunes) != "" {
			checkFuzzEdit(t, boundaryPad(raw)+raw, e)
		}
	})
}

// boundaryPadRunes are the only runes boundaryPad emits.
const boundaryPadRunes = "😀_"

// boundaryPad is a newline-free prefix that puts UTF-16 unit 4096 halfway
// into raw. Its leading emoji make units, code points and bytes all differ;
// the rest is ASCII to keep each exec cheap.
func boundaryPad(raw string) string {
	units := 0
	for _, r := range raw {
		units += utf16.RuneLen(r)
	}
	k := max(0, 4096-units/2)
	emoji := min(k/2, 16)
	return strings.Repeat("😀", emoji) + strings.Repeat("_", k-2*emoji)
}

// checkFuzzEdit runs one edit and checks it against the oracles.
func checkFuzzEdit(t *testing.T, raw string, e Edit) {
	t.Helper()
	out, before, after, n, err := applyLiteralEdit(raw, e, "X")
	oldNorm := strings.ReplaceAll(e.Old, "\r\n", "\n")
	count := 0
	if oldNorm != "" {
		count = strings.Count(strings.ReplaceAll(raw, "\r\n", "\n"), oldNorm)
	}
	if wantErr := expectedEditError(oldNorm, count, e.ReplaceAll); wantErr != nil || err != nil {
		checkEditError(t, err, wantErr)
		if out != "" || before != "" || after != "" || n != 0 {
			t.Fatalf("error with non-zero results %q, %q, %q, %d", out, before, after, n)
		}
		return
	}
	checkEditResult(t, raw, oldNorm, strings.ReplaceAll(e.New, "\r\n", "\n"), out, before, after, n, count, e.ReplaceAll)
}

// expectedEditError is the error the reference implementation's rules demand,
// or nil.
func expectedEditError(oldNorm string, count int, replaceAll bool) *editErrorWant {
	switch {
	case oldNorm == "":
		return &editErrorWant{"", "old_string must be a non-empty string"}
	case count == 0:
		return &editErrorWant{versionstore.CodeEditNotFound, `old_string was not found in "X"`}
	case count > 1 && !replaceAll:
		return &editErrorWant{versionstore.CodeAmbiguousEdit, "old_string matched " + strconv.Itoa(count) +
			` times in "X"; provide a more specific old_string or set replace_all to true`}
	}
	return nil
}

// editErrorWant is an edit failure as the model sees it.
type editErrorWant struct {
	Code    versionstore.Code
	Message string
}

// checkEditError requires err to be exactly want.
func checkEditError(t *testing.T, err error, want *editErrorWant) {
	t.Helper()
	if want == nil {
		t.Fatalf("unexpected error %v", err)
	}
	code, msg := errParts(err)
	if code != "" && code != versionstore.CodeEditNotFound && code != versionstore.CodeAmbiguousEdit {
		t.Fatalf("code %s is not an edit code", code)
	}
	if code != want.Code || msg != want.Message {
		t.Fatalf("err = %s %q, want %s %q", code, msg, want.Code, want.Message)
	}
}

// checkEditResult verifies a successful edit's invariants.
func checkEditResult(t *testing.T, raw, oldNorm, newNorm, out, before, after string, n, count int, replaceAll bool) {
	t.Helper()
	if want := strings.ReplaceAll(raw, "\r\n", "\n"); before != want {
		t.Fatalf("before = %q, want %q", before, want)
	}
	if n != count || (!replaceAll && n != 1) {
		t.Fatalf("n = %d, count = %d, replaceAll = %v", n, count, replaceAll)
	}
	// Split and Join is a second, independent spelling of ReplaceAll.
	if want := strings.Join(strings.Split(before, oldNorm), newNorm); after != want {
		t.Fatalf("after = %q, want %q", after, want)
	}
	if len(after) != len(before)+n*(len(newNorm)-len(oldNorm)) {
		t.Fatalf("len(after) = %d, want %d", len(after), len(before)+n*(len(newNorm)-len(oldNorm)))
	}
	if !oracleCRLF(raw) {
		if out != after {
			t.Fatalf("LF style: out = %q, want after %q", out, after)
		}
		return
	}
	if want := strings.ReplaceAll(after, "\n", "\r\n"); out != want {
		t.Fatalf("CRLF style: out = %q, want %q", out, want)
	}
	if strings.ReplaceAll(out, "\r\n", "\n") != after {
		t.Fatalf("CRLF style: out %q does not normalize back to after %q", out, after)
	}
	if strings.Count(out, "\n") != strings.Count(out, "\r\n") {
		t.Fatalf("CRLF style: out %q has a bare LF", out)
	}
}

// oracleCRLF decides the style the way the reference implementation does,
// literally: encode to UTF-16, keep the first 4096 units, and compare CRLFs
// with bare LFs.
func oracleCRLF(raw string) bool {
	u := make([]uint16, 0, 4097)
	for _, r := range raw {
		if len(u) >= 4096 {
			break
		}
		u = utf16.AppendRune(u, r)
	}
	u = u[:min(len(u), 4096)]
	crlf, lf := 0, 0
	for i, c := range u {
		switch {
		case c != '\n':
		case i > 0 && u[i-1] == '\r':
			crlf++
		default:
			lf++
		}
	}
	return crlf > lf
}
