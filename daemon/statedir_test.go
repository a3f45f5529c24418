package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// State directories are named for the workspace, with a short hash; one of
// the old name (ws-<16 hex>) is moved to the new one, index and all.
func TestDefaultStateDir(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	ws := filepath.Join(t.TempDir(), "my project")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := DefaultStateDir(ws)
	if err != nil || !regexp.MustCompile(`/dshfs/my_project-[0-9a-f]{8}$`).MatchString(dir) {
		t.Fatalf("state directory %q, %v", dir, err)
	}
	// A workspace indexed by an earlier dshfs: its directory is moved.
	real, _ := filepath.EvalSymlinks(ws)
	legacy := filepath.Join(state, "dshfs", "ws-"+legacyHash(real))
	if err := os.MkdirAll(legacy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, "index.db"), []byte("index"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := DefaultStateDir(ws); err != nil || got != dir {
		t.Fatalf("with a legacy directory: %q, %v; want %q", got, err, dir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "index.db")); err != nil || string(b) != "index" {
		t.Fatalf("the legacy index did not move: %q %v", b, err)
	}
	if _, err := os.Stat(legacy); err == nil {
		t.Fatal("the legacy directory is still there")
	}
	for in, want := range map[string]string{"/": "root", "/a/ws": "ws", "/a/sp ace:x": "sp_ace_x", "/a/" + strings.Repeat("x", 40): strings.Repeat("x", 32)} {
		if got := stateName(in); got != want {
			t.Errorf("stateName(%q) = %q, want %q", in, got, want)
		}
	}
}

func legacyHash(real string) string {
	sum := sha256.Sum256([]byte(real))
	return hex.EncodeToString(sum[:8])
}
