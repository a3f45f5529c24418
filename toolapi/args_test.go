package toolapi

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The one-pass decode of arguments reports exactly what decoding each raw
// value does, for every shape of argument the checks distinguish.
func TestDecodeArgsOnePassMatchesPerValue(t *testing.T) {
	values := []string{`"s"`, `""`, `"a\nb\u00e9\"q"`, `1`, `-2.5`, `0`, `1e3`, `true`, `false`, `null`, `{}`, `[1]`, `{"x":[null]}`}
	props := editProps
	for _, fp := range values {
		for _, old := range values {
			for _, ra := range values {
				for _, omit := range []string{"", "file_path", "new_string"} {
					obj := map[string]json.RawMessage{"file_path": json.RawMessage(fp), "old_string": json.RawMessage(old),
						"new_string": json.RawMessage(`"n"`), "replace_all": json.RawMessage(ra), "extra": json.RawMessage(old)}
					delete(obj, omit)
					raw, _ := json.Marshal(obj)
					var decoded map[string]any
					if err := json.Unmarshal(raw, &decoded); err != nil {
						t.Fatal(err)
					}
					got, gerr := checkArgs(decoded, props)
					want, werr := checkRawArgs(raw, props)
					if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gerr, werr) {
						t.Fatalf("%s:\n one pass  %v, %v\n per value %v, %v", raw, got, gerr, want, werr)
					}
				}
			}
		}
	}
}

func FuzzDecodeArgs(f *testing.F) {
	f.Add([]byte(`{"file_path":"a","content":"x"}`))
	f.Add([]byte(`{"file_path":1e400,"content":"x"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, gerr := decodeArgs(raw, writeProps)
		if len(raw) == 0 || raw[0] != '{' {
			return
		}
		if !json.Valid(raw) {
			return
		}
		want, werr := checkRawArgs(raw, writeProps)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gerr, werr) {
			t.Fatalf("%s:\n decodeArgs    %v, %v\n checkRawArgs  %v, %v", raw, got, gerr, want, werr)
		}
	})
}
