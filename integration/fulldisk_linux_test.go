package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// With the disk of the daemon's state directory full, the index cannot
// record what a checkpoint's or a rewind's look over the workspace finds:
// both exit 3 with one sentence that says so, never a count of files
// changed, and the rewind changes nothing.
func TestFullStateDiskFailsCheckpointAndRewind(t *testing.T) {
	testfuse.Require(t)
	state := t.TempDir()
	if err := unix.Mount("tmpfs", state, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(state, 0); err != nil {
			t.Errorf("unmount tmpfs: %v", err)
		}
	})
	backing, mnt := t.TempDir(), filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(state, "filler")
	t.Cleanup(func() {
		os.Remove(filler) // room for the daemon to close its index
		dshfs(t, state, "unmount", mnt)
		unix.Unmount(mnt, unix.MNT_DETACH)
	})
	run := func(want int, args ...string) string {
		t.Helper()
		out, code := dshfs(t, state, args...)
		if code != want {
			t.Fatalf("dshfs %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return out
	}
	if err := os.WriteFile(filepath.Join(backing, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(0, "mount", backing, mnt)
	run(0, "checkpoint", "--mount", mnt, "cp")

	fillUp(t, filler)
	r := rand.NewChaCha8([32]byte{3})
	for i := range 300 {
		b := make([]byte, 4<<10) // incompressible: the index needs new pages
		r.Read(b)
		if err := os.WriteFile(filepath.Join(backing, fmt.Sprintf("new%03d.bin", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(backing, "a.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	const says = "the index could not record the change (no space left on device); make room where dshfs keeps its state, then retry"
	for _, args := range [][]string{{"checkpoint", "--mount", mnt}, {"rewind", "--mount", mnt, "cp"}} {
		out := run(3, args...)
		if !strings.Contains(out, says) || strings.Contains(out, "file(s) changed") {
			t.Errorf("dshfs %v on a full state disk says:\n%s", args, out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(backing, "a.txt")); string(b) != "two\n" {
		t.Errorf("a failed rewind changed a.txt to %q", b)
	}
}

// fillUp writes the file at p until its filesystem is full.
func fillUp(t *testing.T, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			chunk = chunk[:len(chunk)/2]
		}
	}
}
