package daemon

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Only a FUSE filesystem's root is refused as a mount point: the root of a
// tmpfs (or of another disk) is a fine place to mount dshfs on.
func TestMountPointOnAnotherFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: this test must run")
		}
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if err := notMounted(dir); err != nil {
		t.Fatalf("a tmpfs root refused: %v", err)
	}
}
