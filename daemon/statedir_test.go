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

// A state directory another user could change — its own, writable by
// others, or inside one of theirs — is refused; the usual places are not.
func TestPrepareStateDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give directories to nobody")
	}
	for _, c := range []struct {
		name   string
		parent os.FileMode // mode of the directory above, owned by root
		mode   os.FileMode
		nobody string // "dir" or "parent": which one nobody owns
		want   string // "" ok, else part of the error
	}{
		{"own", 0o755, 0o700, "", ""},
		{"own group-writable", 0o755, 0o770, "", ""},
		{"in sticky tmp", 0o777 | os.ModeSticky, 0o700, "", ""},
		{"world-writable", 0o755, 0o777, "", "is writable by other users"},
		{"nobody's", 0o755, 0o700, "dir", "belongs to uid 65534"},
		{"in nobody's", 0o755, 0o700, "parent", "which belongs to uid 65534"},
		{"in world-writable", 0o777, 0o700, "", "which other users may write"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "p")
			dir := filepath.Join(parent, "state")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for p, m := range map[string]os.FileMode{parent: c.parent, dir: c.mode} {
				if err := os.Chmod(p, m); err != nil {
					t.Fatal(err)
				}
			}
			if c.nobody != "" {
				p := map[string]string{"dir": dir, "parent": parent}[c.nobody]
				if err := os.Chown(p, 65534, 65534); err != nil {
					t.Fatal(err)
				}
			}
			_, err := PrepareStateDir(dir)
			if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Errorf("PrepareStateDir: %v, want %q", err, c.want)
			}
		})
	}
}

// The state directory is used by the path that was checked: a link on the
// way given (in a directory another user may change, say) could be
// pointed elsewhere once the check is done, so its target is what is
// returned, and what the daemon opens its files in from then on.
func TestPrepareStateDirResolvesLinks(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := PrepareStateDir(filepath.Join(base, "link", "state"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.EvalSymlinks(filepath.Join(real, "state"))
	if got != want {
		t.Fatalf("PrepareStateDir through a link: %q, want the checked directory %q", got, want)
	}
}
