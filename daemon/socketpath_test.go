package daemon

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// A state directory whose socket path is longer than the kernel takes for
// a socket is refused before anything is mounted, with the fix (a shorter
// --state), rather than failing at bind with "invalid argument".
func TestSocketPathTooLong(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("s", 120))
	cfg := Config{Backing: t.TempDir(), StateDir: long}
	err := cfg.resolveStateDir()
	if err == nil || !strings.Contains(err.Error(), "--state") || !strings.Contains(err.Error(), fmt.Sprint(len(socketPath(long)))) {
		t.Fatalf("state directory of %d bytes: %v, want a refusal that gives the socket path's length and names --state", len(long), err)
	}
	short := Config{Backing: t.TempDir(), StateDir: filepath.Join(t.TempDir(), "state")}
	if err := short.resolveStateDir(); err != nil {
		t.Fatalf("a short state directory is refused: %v", err)
	}
}

// The readable part of a state directory's name is capped in bytes, not
// letters: 40 letters of two bytes each are cut to 32 bytes, whole letters.
func TestStateNameCappedInBytes(t *testing.T) {
	for _, in := range []string{strings.Repeat("é", 40), strings.Repeat("語", 40), "a" + strings.Repeat("é", 40)} {
		got := stateName("/w/" + in)
		if len(got) > 32 || !utf8.ValidString(got) || !strings.HasPrefix(in, got) || len(got) < 30 {
			t.Errorf("stateName(%q) = %q (%d bytes), want a prefix of whole letters of at most 32 bytes", in, got, len(got))
		}
	}
}
