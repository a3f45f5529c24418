package versionstore

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A tree from a bucket that asks for setuid, setgid or sticky bits gets
// the permission bits only.
func TestPopulateDropsSpecialBits(t *testing.T) {
	ts := openTestStore(t)
	data := []byte("#!/bin/sh\nid\n")
	entries := []TreeEntry{
		{Path: "bin/tool", Type: TreeFile, Perm: fs.ModeSetuid | fs.ModeSetgid | 0o755, Version: Sum(data)},
		{Path: "bin", Type: TreeDir, Perm: fs.ModeSticky | fs.ModeSetgid | 0o750},
	}
	missing, err := ts.Populate(entries, func(Version) ([]byte, error) { return data, nil })
	if err != nil || len(missing) > 0 {
		t.Fatalf("populate: missing %v, err %v", missing, err)
	}
	for name, want := range map[string]fs.FileMode{"bin/tool": 0o755, "bin": fs.ModeDir | 0o750} {
		fi, err := os.Lstat(filepath.Join(ts.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), want)
		}
	}
}

// A directory's bits are set through a descriptor that does not follow a
// symlink: a link put where a directory of the tree was leaves its target
// alone.
func TestPopulateChmodDoesNotFollowSymlink(t *testing.T) {
	ts := openTestStore(t)
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ts.dir, "d")); err != nil {
		t.Fatal(err)
	}
	err := ts.chmodDirs([]TreeEntry{{Path: "d", Type: TreeDir, Perm: 0o777}})
	if err == nil {
		t.Error("chmod through a symlink: no error")
	}
	fi, err := os.Stat(outside)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("the link's target got mode %v", fi.Mode().Perm())
	}
}
