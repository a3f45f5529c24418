// Regression tests: each comment says what used to go wrong.

package unixsocket

import (
	"encoding/json"
	"reflect"
	"testing"
)

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
