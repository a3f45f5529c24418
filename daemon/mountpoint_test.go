package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A missing mount point is made, with the directories above it, and Unmake
// removes what was made; one that holds files is refused unless nonempty;
// one inside the backing directory is refused before it is made.
func TestPrepareMountpoint(t *testing.T) {
	backing, dir := t.TempDir(), t.TempDir()
	mnt := filepath.Join(dir, "a", "mnt")
	mp, err := PrepareMountPoint(backing, mnt, false)
	if err != nil || mp.Path != mnt || !slices.Equal(mp.Made, []string{mnt, filepath.Join(dir, "a")}) {
		t.Fatalf("missing mount point: %+v, %v", mp, err)
	}
	if fi, err := os.Stat(mnt); err != nil || !fi.IsDir() {
		t.Fatalf("the mount point was not made: %v", err)
	}
	mp.Unmake()
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Unmake left what was made: %v", err)
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "kept.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = PrepareMountPoint(backing, mnt, false)
	if err == nil || !strings.Contains(err.Error(), "is not empty (it holds kept.txt)") || !strings.Contains(err.Error(), "pass --nonempty") {
		t.Fatalf("non-empty mount point: %v", err)
	}
	if mp, err := PrepareMountPoint(backing, mnt, true); err != nil || mp.Made != nil {
		t.Fatalf("non-empty mount point with --nonempty: %+v, %v", mp, err)
	}
	inner := filepath.Join(backing, "inner")
	if _, err := PrepareMountPoint(backing, inner, false); err == nil || !strings.Contains(err.Error(), "inside the backing directory") {
		t.Fatalf("mount point inside the backing directory: %v", err)
	}
	if _, err := os.Stat(inner); err == nil {
		t.Fatal("a refused mount point was made")
	}
}

// fusermount3's own words, then the fix this machine needs.
func TestExplainMountFailure(t *testing.T) {
	goFuse := errors.New("mount: fusermount exited with code 256\n")
	said := []string{"/usr/bin/fusermount3: failed to open /dev/fuse: Permission denied"}
	err := explainMountFailure(goFuse, said, false)
	if !strings.HasPrefix(err.Error(), "mount failed: /usr/bin/fusermount3: failed to open /dev/fuse: Permission denied") {
		t.Fatalf("explained as %q", err)
	}
	if err := explainMountFailure(goFuse, nil, false); !strings.HasPrefix(err.Error(), "mount: fusermount exited with code 256") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("with nothing said: %q", err)
	}
}
