package toolapi

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// argError is a tool-level argument failure: a plain error with no code, as
// the reference implementation's validation errors.
type argError string

func (e argError) Error() string { return string(e) }

// args holds decoded arguments, checked against their schema.
type args map[string]any

// decodeArgs parses raw against props and reports every violation the way the
// reference implementation's runtime does — missing required properties first,
// then type errors, each in schema order: `invalid arguments: v1; v2`.
func decodeArgs(raw json.RawMessage, props []property) (args, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}") // no arguments at all: report what is missing
	}
	if raw[0] != '{' {
		return nil, argError(`invalid arguments: "arguments" must be an object`)
	}
	// One pass over the arguments, which may hold a write's whole content:
	// decoded straight into values, then checked. Anything that does not
	// decode so (a number past float64, say) is reported by the checks of
	// each raw value below, as the reference implementation reports it.
	var values map[string]any
	if json.Unmarshal(raw, &values) == nil {
		return checkArgs(values, props)
	}
	return checkRawArgs(raw, props)
}

// checkRawArgs is decodeArgs value by value, for arguments that do not
// decode in one pass.
func checkRawArgs(raw json.RawMessage, props []property) (args, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil, argError(`invalid arguments: "arguments" must be an object`)
	}
	var violations []string
	for _, p := range props {
		if _, ok := obj[p.name]; !ok && p.required {
			violations = append(violations, `missing required property "`+p.name+`"`)
		}
	}
	a := args{}
	for _, p := range props {
		v, ok := obj[p.name]
		if !ok {
			continue
		}
		val, ok := decodeTyped(v, p.typ)
		if !ok {
			violations = append(violations, `"`+p.name+`" must be a `+p.typ)
			continue
		}
		a[p.name] = val
	}
	if len(violations) > 0 {
		return nil, argError("invalid arguments: " + strings.Join(violations, "; "))
	}
	return a, nil
}

// checkArgs checks decoded values against props, reporting as decodeArgs.
func checkArgs(values map[string]any, props []property) (args, error) {
	var violations []string
	for _, p := range props {
		if _, ok := values[p.name]; !ok && p.required {
			violations = append(violations, `missing required property "`+p.name+`"`)
		}
	}
	a := args{}
	for _, p := range props {
		v, ok := values[p.name]
		if !ok {
			continue
		}
		if !hasType(v, p.typ) {
			violations = append(violations, `"`+p.name+`" must be a `+p.typ)
			continue
		}
		a[p.name] = v
	}
	if len(violations) > 0 {
		return nil, argError("invalid arguments: " + strings.Join(violations, "; "))
	}
	return a, nil
}

// hasType reports whether a decoded JSON value is of the schema type typ.
func hasType(v any, typ string) bool {
	switch v.(type) {
	case string:
		return typ == "string"
	case float64:
		return typ == "number"
	case bool:
		return typ == "boolean"
	}
	return false
}

func decodeTyped(raw json.RawMessage, typ string) (any, bool) {
	switch typ {
	case "string":
		var s string
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return s, true
	case "number":
		var f float64
		if c := raw[0]; c != '-' && (c < '0' || c > '9') || json.Unmarshal(raw, &f) != nil {
			return nil, false // only a JSON number token: not null, not a string
		}
		return f, true
	case "boolean":
		var b bool
		if c := raw[0]; c != 't' && c != 'f' || json.Unmarshal(raw, &b) != nil {
			return nil, false
		}
		return b, true
	}
	return nil, false
}

func (a args) str(name string) string {
	s, _ := a[name].(string)
	return s
}

func (a args) boolean(name string) bool {
	b, _ := a[name].(bool)
	return b
}

// number returns the argument and whether it was given.
func (a args) number(name string) (float64, bool) {
	f, ok := a[name].(float64)
	return f, ok
}

// filePath applies the reference implementation's first check of every tool.
func (a args) filePath() (string, error) {
	p := a.str("file_path")
	if strings.TrimSpace(p) == "" {
		return "", argError("file_path must be a non-empty string")
	}
	return p, checkPathLength("file_path", p)
}

// positiveInt checks a 1-based count: finite, integral, at least 1.
func positiveInt(f float64, name string) (int, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f < 1 {
		return 0, argError(name + " must be a positive integer")
	}
	if f > math.MaxInt32 {
		return math.MaxInt32, nil // beyond any file's line count; keeps arithmetic safe
	}
	return int(f), nil
}

// jsNumber formats a number the way JavaScript prints it, for messages that
// quote an argument back.
func jsNumber(f float64) string {
	if math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
