package unixsocket

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
)

// The hand-written encoder writes exactly the bytes encoding/json writes.
func TestAppendToolResultMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pieces := []string{"a", "é", "😀", "\n", "\t", "\r", "\b", "\f", "\x00", "\x1f", "\x7f", "\"", "\\", "/", "<", ">", "&",
		"\u2028", "\u2029", "\xff", "\xe2\x80", "\xed\xa0\x80", "line of text "}
	str := func() string {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return sb.String()
	}
	v, prev := versionstore.SumString("x"), versionstore.SumString("y")
	for i := range 3000 {
		r := toolapi.Result{Text: str(), IsError: rng.IntN(2) == 0}
		if r.IsError {
			r.Error = &toolapi.ErrorInfo{Code: []string{"", "FS_NOT_FOUND"}[rng.IntN(2)], Message: str()}
		}
		switch i % 5 {
		case 1:
			lines := []toolapi.Line{}
			for n := range rng.IntN(5) {
				lines = append(lines, toolapi.Line{Number: n + 1, Text: str()})
			}
			if rng.IntN(10) == 0 {
				lines = nil
			}
			r.Value = toolapi.ReadValue{Path: str(), Offset: rng.IntN(9), Lines: lines, TotalLines: rng.IntN(99), Version: v}
		case 2:
			w := toolapi.WriteValue{Path: str(), Operation: "update", Version: v}
			if rng.IntN(2) == 0 {
				w.Previous = &prev
			}
			r.Value = w
		case 3:
			r.Value = toolapi.EditValue{Path: str(), Operation: "update", Replacements: rng.IntN(3), Version: v, Previous: prev}
		case 4:
			r.Value = toolapi.ReadValue{Path: str()} // zero version
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		got, ok := appendToolResult(nil, r)
		if !ok || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%#v:\n got %s\nwant %s", r, got, want.Bytes())
		}
	}
	if _, ok := appendToolResult(nil, toolapi.Result{Value: toolapi.ImageValue{}}); ok {
		t.Fatal("an image value took the hand-written path")
	}
}
