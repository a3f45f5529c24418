package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/internal/testfuse"
	"golang.org/x/sys/unix"
)

// A state directory another user controls is refused before anything in it
// is opened: its owner could have left links there to the files of whoever
// mounts (the log is appended to, the index written), and could swap them
// at any time.
func TestMountRefusesStateDirOfAnotherUser(t *testing.T) {
	testfuse.Require(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to nobody")
	}
	home, backing, mnt := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	victim, victimIndex := filepath.Join(home, ".bashrc"), filepath.Join(home, "data.db")
	for _, f := range []string{victim, victimIndex} {
		if err := os.WriteFile(f, []byte("precious\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"dshfs.log": victim, "index.db": victimIndex, "unmount-error": victim} {
		if err := os.Symlink(target, filepath.Join(state, link)); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(filepath.Join(state, link), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(state, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, mntDetach) })

	out, code := dshfs(t, t.TempDir(), "mount", "--state", state, backing, mnt)
	if code == 0 || !strings.Contains(out, state+" belongs to uid 65534") {
		t.Errorf("mount with a state directory of nobody's: exit %d\n%s", code, out)
	}
	if testfuse.Mounted(mnt) {
		dshfs(t, t.TempDir(), "unmount", mnt)
		t.Error("mounted anyway")
	}
	out, code = dshfs(t, t.TempDir(), "exec", "--state", state, "--backing", backing, "read", `{"file_path":"x"}`)
	if code == 0 || !strings.Contains(out, state+" belongs to uid 65534") {
		t.Errorf("exec with a state directory of nobody's: exit %d\n%s", code, out)
	}
	for _, f := range []string{victim, victimIndex} {
		if b, _ := os.ReadFile(f); string(b) != "precious\n" {
			t.Errorf("%s now holds %q", f, b)
		}
	}
}
