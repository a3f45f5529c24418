package unixsocket

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

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
