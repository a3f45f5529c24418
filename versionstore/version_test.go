package versionstore

import (
	"encoding/json"
	"strings"
	"testing"
)

// The BLAKE3 reference vector for empty input pins the hash function and the
// text form.
func TestVersionFormat(t *testing.T) {
	const empty = "b3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
	v := Sum(nil)
	if v.String() != empty {
		t.Fatalf("Sum(nil) = %s", v)
	}
	p, err := ParseVersion(empty)
	if err != nil || p != v {
		t.Fatalf("ParseVersion = %s, %v", p, err)
	}
	b, _ := json.Marshal(struct{ V Version }{v})
	if string(b) != `{"V":"`+empty+`"}` {
		t.Fatalf("JSON = %s", b)
	}
	var back struct{ V Version }
	if err := json.Unmarshal(b, &back); err != nil || back.V != v {
		t.Fatalf("round trip = %v, %v", back.V, err)
	}
	if (Version{}).String() != "" || !(Version{}).IsZero() || v.Short() != "af1349b9f5f9" {
		t.Fatal("zero or short form")
	}
	hv, n, err := HashReader(strings.NewReader("abc"))
	if err != nil || n != 3 || hv != SumString("abc") {
		t.Fatal("HashReader disagrees with Sum")
	}
	for _, bad := range []string{"", "b3:", "sha256:" + empty[3:], empty[:len(empty)-1], "b3:" + strings.Repeat("g", 64)} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) succeeded", bad)
		}
	}
}
