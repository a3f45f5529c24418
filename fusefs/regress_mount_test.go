// Regression tests: each comment says what used to go wrong.

package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// Preserve does not look at the dirty mark: when a file that a process is
// writing through the mount is removed (or renamed, truncated by name,
// created over with O_CREAT) through the mount, the bytes that process has
// written so far are recorded, and journaled, as an "external" change —
// a write behind dshfs's back — though they came through the mount.
// noteVersion, commitChange and recordSnapshot all defer to the mount's
// commit while the file is dirty; Preserve attributes the mount's own
// bytes to nobody.
func TestPreserveOfAFileBeingWrittenIsNotExternal(t *testing.T) {
	for _, op := range []string{"unlink", "rename"} {
		t.Run(op, func(t *testing.T) {
			m := mountT(t)
			m.putBacking("f", "one\n")
			m.seeFile("f")
			f, err := os.OpenFile(filepath.Join(m.mnt, "f"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("two\n"); err != nil { // no flush: still dirty
				t.Fatal(err)
			}
			switch op {
			case "unlink":
				err = os.Remove(filepath.Join(m.mnt, "f"))
			case "rename":
				err = os.Rename(filepath.Join(m.mnt, "f"), filepath.Join(m.mnt, "g"))
			}
			if err != nil {
				t.Fatal(err)
			}
			h, err := m.store.History("f")
			if err != nil {
				t.Fatal(err)
			}
			partial := versionstore.SumString("one\ntwo\n")
			for _, e := range h {
				if e.Version == partial && e.Writer.Kind == versionstore.WriterExternal {
					t.Fatalf("history of f %+v: bytes written through the mount recorded as written behind dshfs's back", h)
				}
			}
		})
	}
}

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

// O_CREAT|O_TRUNC on an existing file keeps its bytes first and records one
// empty version by the caller (not an "external" one), also when the file
// is opened read-only.
func TestCreateTruncKeepsBytesAndAttribution(t *testing.T) {
	m := mountT(t)
	m.putBacking("f", "precious\n")
	m.seeFile("f")
	for _, mode := range []int{os.O_WRONLY, os.O_RDONLY} {
		f, err := os.OpenFile(filepath.Join(m.mnt, "f"), mode|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got, _ := m.getBacking("f"); got != "" {
			t.Fatalf("mode %d: f = %q after O_TRUNC", mode, got)
		}
		m.putBacking("f", "precious\n")
		m.seeFile("f")
	}
	if !m.store.HasObject(versionstore.SumString("precious\n")) {
		t.Fatal("the truncated bytes were not kept")
	}
	h, err := m.store.History("f")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h {
		if e.Version == versionstore.SumString("") && e.Writer.Kind != versionstore.WriterMount {
			t.Fatalf("the truncation is recorded as %+v", e.Writer)
		}
	}
}
