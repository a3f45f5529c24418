package versionstore

import (
	"encoding/hex"
	"errors"
	"io"
	"strings"

	"github.com/zeebo/blake3"
)

// Version is the BLAKE3-256 digest of a file's exact bytes. The zero value
// means "no version" (an absent file); a real file never hashes to it.
type Version [32]byte

const versionPrefix = "b3:"

// Sum returns the version of b.
func Sum(b []byte) Version { return Version(blake3.Sum256(b)) }

// SumString returns the version of the UTF-8 bytes of s.
func SumString(s string) Version { return Sum([]byte(s)) }

// HashReader returns the version of everything r yields and its length.
func HashReader(r io.Reader) (Version, int64, error) {
	h := blake3.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return Version{}, n, err
	}
	var v Version
	h.Sum(v[:0])
	return v, n, nil
}

// IsZero reports whether v is the zero (absent) version.
func (v Version) IsZero() bool { return v == Version{} }

// String formats v as b3:<64 lowercase hex digits>; the zero version is "".
func (v Version) String() string {
	if v.IsZero() {
		return ""
	}
	return versionPrefix + hex.EncodeToString(v[:])
}

// Short is the first 12 hex digits, for people.
func (v Version) Short() string {
	if v.IsZero() {
		return "-"
	}
	return hex.EncodeToString(v[:6])
}

// ParseVersion parses the b3:<hex> form.
func ParseVersion(s string) (Version, error) {
	var v Version
	h, ok := strings.CutPrefix(s, versionPrefix)
	if !ok || len(h) != 2*len(v) {
		return v, errors.New("version must be b3: followed by 64 hex digits")
	}
	if _, err := hex.Decode(v[:], []byte(h)); err != nil {
		return v, errors.New("version must be b3: followed by 64 hex digits")
	}
	return v, nil
}

// MarshalText implements encoding.TextMarshaler.
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; "" is the zero version.
func (v *Version) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*v = Version{}
		return nil
	}
	p, err := ParseVersion(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}
