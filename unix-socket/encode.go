package unixsocket

import (
	"strconv"
	"unicode/utf8"

	"github.com/dshfs/dshfs/toolapi"
)

// appendToolResult appends the JSON of a tool call's answer exactly as
// encoding/json (HTML escaping off, trailing newline) writes it, for the
// answers of read, write and edit: encoding/json finds the fields by
// reflection on every call, which costs a read's answer more than its
// bytes. Other values (read_image's) report false: encode them normally.
func appendToolResult(dst []byte, r toolapi.Result) ([]byte, bool) {
	dst = append(dst, `{"text":`...)
	dst = appendString(dst, r.Text)
	dst = append(dst, `,"is_error":`...)
	dst = strconv.AppendBool(dst, r.IsError)
	if r.Error != nil {
		dst = append(dst, `,"error":{`...)
		if r.Error.Code != "" {
			dst = append(dst, `"code":`...)
			dst = appendString(dst, r.Error.Code)
			dst = append(dst, ',')
		}
		dst = append(dst, `"message":`...)
		dst = appendString(dst, r.Error.Message)
		dst = append(dst, '}')
	}
	switch v := r.Value.(type) {
	case nil:
	case toolapi.ReadValue:
		dst = append(dst, `,"value":{"path":`...)
		dst = appendString(dst, v.Path)
		dst = append(dst, `,"offset":`...)
		dst = strconv.AppendInt(dst, int64(v.Offset), 10)
		if v.Lines == nil {
			dst = append(dst, `,"lines":null`...)
		} else {
			dst = append(dst, `,"lines":[`...)
			for i, l := range v.Lines {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"number":`...)
				dst = strconv.AppendInt(dst, int64(l.Number), 10)
				dst = append(dst, `,"text":`...)
				dst = appendString(dst, l.Text)
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
		dst = append(dst, `,"totalLines":`...)
		dst = strconv.AppendInt(dst, int64(v.TotalLines), 10)
		dst = append(dst, `,"version":`...)
		dst = appendString(dst, v.Version.String())
		dst = append(dst, '}')
	case toolapi.WriteValue:
		dst = append(dst, `,"value":{"path":`...)
		dst = appendString(dst, v.Path)
		dst = append(dst, `,"operation":`...)
		dst = appendString(dst, v.Operation)
		dst = append(dst, `,"version":`...)
		dst = appendString(dst, v.Version.String())
		if v.Previous != nil {
			dst = append(dst, `,"previous_version":`...)
			dst = appendString(dst, v.Previous.String())
		}
		dst = append(dst, '}')
	case toolapi.EditValue:
		dst = append(dst, `,"value":{"path":`...)
		dst = appendString(dst, v.Path)
		dst = append(dst, `,"operation":`...)
		dst = appendString(dst, v.Operation)
		dst = append(dst, `,"replacements":`...)
		dst = strconv.AppendInt(dst, int64(v.Replacements), 10)
		dst = append(dst, `,"version":`...)
		dst = appendString(dst, v.Version.String())
		dst = append(dst, `,"previous_version":`...)
		dst = appendString(dst, v.Previous.String())
		dst = append(dst, '}')
	default:
		return dst, false
	}
	return append(dst, "}\n"...), true
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does with
// HTML escaping off: short escapes for \b \f \n \r \t, \u00XX for other
// control bytes, \ufffd for invalid UTF-8, \u2028 and \u2029 escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i = plainRun(s, i); i == len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
