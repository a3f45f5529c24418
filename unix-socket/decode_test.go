package unixsocket

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/toolapi"
)

// The one-pass decoder gives exactly what encoding/json gives.
func TestDecodeToolResultMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		`{"text":"plain","is_error":false}`,
		`{"text":"a\nb\t\"q\"\\ \/ \b\f\r \u00e9 \ud83d\ude00 \ud800 x","is_error":true,"error":{"code":"FS_NOT_FOUND","message":"m"}}`,
		`{ "text" : "spaced" , "is_error" : false , "value" : { "a" : [1, "}", {"b": "]"}] } }`,
		`{"value":null,"error":null,"text":""}`,
		`{"value":12.5e3 ,"text":"n"}`,
		`{"Text":"case folded"}`,
		`{"text":"dup","text":"last"}`,
		`{"unknown":{"x":[true,false,null]},"text":"u"}`,
		`{}`,
		"{\"text\":\"invalid \xff utf8\"}",
		`{"text":"unterminated}`,
		`{"text":"x"} trailing`,
		`[1,2]`,
		`{"value":{"s":"a\"}b"},"text":"esc in raw"}`,
		`{"is_error":tru}`,
	}
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := []rune("ab \n\t\"\\/<>&é😀\u2028\x01}{][,:")
	for range 2000 {
		var sb strings.Builder
		for range rng.IntN(40) {
			sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		r := toolapi.Result{Text: sb.String(), IsError: rng.IntN(2) == 0,
			Value: map[string]any{"path": sb.String(), "lines": []any{map[string]any{"number": 1, "text": sb.String()}}}}
		if r.IsError {
			r.Error = &toolapi.ErrorInfo{Code: "FS_IO_ERROR", Message: sb.String()}
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(rng.IntN(2) == 0)
		enc.Encode(r)
		cases = append(cases, buf.String())
	}
	fast := 0
	for _, c := range cases {
		var want, got ToolResult
		werr := json.Unmarshal([]byte(c), &want)
		var r ToolResult
		if fastToolResult([]byte(c), &r) {
			fast++
			if werr != nil {
				t.Errorf("fast path accepted what encoding/json refuses (%v): %s", werr, c)
				continue
			}
		}
		gerr := decodeToolResult([]byte(c), &got)
		if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(normal(got), normal(want)) {
			t.Errorf("%s:\n got %+v %v\nwant %+v %v", c, got, gerr, want, werr)
		}
	}
	if fast < 2000 {
		t.Errorf("only %d of %d answers took the fast path", fast, len(cases))
	}
}

// normal compacts a raw value, which encoding/json keeps as sent.
func normal(r ToolResult) ToolResult {
	if r.Value != nil {
		var b bytes.Buffer
		if json.Compact(&b, r.Value) == nil {
			r.Value = b.Bytes()
		}
	}
	return r
}

func FuzzDecodeToolResult(f *testing.F) {
	f.Add([]byte(`{"text":"a\nb","is_error":false,"value":{"x":[1,"]"]}}`))
	f.Add([]byte(`{"text":"\ud83d\ude00","error":{"code":"c","message":"m"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r ToolResult
		if !fastToolResult(b, &r) {
			return
		}
		var want ToolResult
		if err := json.Unmarshal(b, &want); err != nil {
			// Only the raw value is not checked: it must be what is wrong.
			if json.Valid(r.Value) {
				t.Fatalf("fast path accepted %q: %v", b, err)
			}
			return
		}
		if !reflect.DeepEqual(normal(r), normal(want)) {
			t.Fatalf("%q:\n got %+v\nwant %+v", b, r, want)
		}
	})
}

// A request is decoded as json.Decoder decodes it: the value, or the
// error.
func TestDecodeRequestAsDecoder(t *testing.T) {
	for _, c := range []string{
		`{"actor":"a","cwd":"/w","arguments":{"file_path":"f.txt","limit":3}}`,
		` { "arguments" : [1, {"x": "}"}] , "actor" : "b\u00e9\n" } `,
		`{"arguments":null}`,
		`{"arguments":{"a":1}} trailing`,
		`{"arguments":{"a":1}}{"arguments":2}`,
		`{"Actor":"folded","arguments":{}}`,
		`{"actor":"a","actor":"b","arguments":{}}`,
		`{"actor":5,"arguments":{}}`,
		`{"arguments":{"a":}}`,
		`{"arguments":{"a":1}`,
		``,
		`[]`,
		"{\"actor\":\"\xff\",\"arguments\":{}}",
		`{"arguments":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, // past encoding/json's depth
	} {
		var got, want ToolRequest
		werr := json.NewDecoder(strings.NewReader(c)).Decode(&want)
		gerr := decodeRequest([]byte(c), &got)
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || !reflect.DeepEqual(got, want) {
			t.Errorf("%.80s:\n got %+v %v\nwant %+v %v", c, got, gerr, want, werr)
		}
	}
}

// A repeated "error" key: encoding/json sets the pointer to nil for null
// and decodes a later object into the struct it already allocated (fields
// the later object omits keep their earlier values). The one-pass decoder
// ignores null and allocates afresh for an object.
func TestDecodeDuplicateKeysAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"text":"t","is_error":true,"error":{"code":"FS_IO_ERROR","message":"m"},"error":null}`,
		`{"text":"t","is_error":true,"error":{"code":"FS_IO_ERROR","message":"m"},"error":{"code":"FS_NOT_FOUND"}}`,
	} {
		var want, got ToolResult
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if err := decodeToolResult([]byte(in), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got error %+v\nwant error %+v", in, got.Error, want.Error)
		}
	}
}
