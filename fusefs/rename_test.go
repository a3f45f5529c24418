// Renames through the mount: what each side of a rename keeps, and what
// is committed when a file is renamed while open.

package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// A symlink renamed through the mount (the atomic symlink swap:
// `ln -s target link.tmp && mv -T link.tmp link`) is committed by Refresh,
// which opens the name and follows the link: the index records the
// target's bytes as a version of the link's path (non-regular files are
// not indexed otherwise), and, with no record and no creation, journals it
// with its prior version "unknown". A rewind to a checkpoint taken before
// the link existed then reports a conflict instead of removing the link.
func TestSymlinkRenameIsNotAnUnknownChange(t *testing.T) {
	m := mountT(t)
	m.putBacking("target.txt", "the target\n")
	m.seeFile("target.txt")
	if _, err := m.store.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target.txt", filepath.Join(m.mnt, "link.tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(m.mnt, "link.tmp"), filepath.Join(m.mnt, "link")); err != nil {
		t.Fatal(err)
	}
	h, _ := m.store.History("link")
	res, err := m.store.Rewind(context.Background(), "cp", versionstore.RewindOptions{Writer: rewinder})
	if err != nil {
		t.Fatal(err)
	}
	if res.Conflicts != 0 {
		t.Fatalf("rewind %+v reports a conflict (history of the symlink's path: %+v)", res, h)
	}
}

// A file renamed while a writer still holds it (sed -i closes its temporary
// file, whose release the kernel sends later, and renames it over the
// original) is committed at its new path by the writer's release. Once a
// flush had committed the temporary file, that release found nothing owed
// and only dropped the mark: the original's new version went unrecorded, and
// a rewind skipped it.
func TestRenameBeforeReleaseIsCommitted(t *testing.T) {
	m := mountT(t)
	m.putBacking("b.txt", "old\n")
	m.seeFile("b.txt")
	f, err := os.OpenFile(filepath.Join(m.mnt, "sedtmp"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new\n")
	held, err := unix.Dup(int(f.Fd())) // the release waits for this one
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // FLUSH: the temporary file's version
	if err := os.Rename(filepath.Join(m.mnt, "sedtmp"), filepath.Join(m.mnt, "b.txt")); err != nil {
		t.Fatal(err)
	}
	unix.Close(held) // FLUSH without writes, then RELEASE
	if n := m.waitUnmarked(); n != 0 {
		t.Fatalf("%d marks left", n)
	}
	h, err := m.store.History("b.txt")
	if err != nil || len(h) == 0 || h[0].Version != versionstore.SumString("new\n") {
		t.Fatalf("b.txt history %+v %v: the renamed file's version was not recorded", h, err)
	}
}
