package versionstore

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestResolve(t *testing.T) {
	ts := openTestStore(t)
	ts.put("dir/file.txt", "x")
	ts.put("real/inner.txt", "y")
	must(t, os.Symlink("real", ts.path("linkdir")))
	must(t, os.Symlink(filepath.Join(ts.dir, "real", "inner.txt"), ts.path("abslink")))
	must(t, os.Symlink("../real/inner.txt", ts.path("dir/rellink")))
	must(t, os.Symlink("nowhere", ts.path("dangling")))

	for _, tc := range []struct {
		rel, key string
	}{
		{".", "."},
		{"dir/file.txt", "dir/file.txt"},
		{"missing.txt", "missing.txt"},          // missing ⇒ realpath(parent) + name
		{"a/b/c.txt", "a/b/c.txt"},              // missing intermediate directories
		{"linkdir/inner.txt", "real/inner.txt"}, // symlinked directory
		{"linkdir/new.txt", "real/new.txt"},     // stable across creation through a symlinked ancestor
		{"abslink", "real/inner.txt"},           // absolute link into the workspace
		{"dir/rellink", "real/inner.txt"},       // relative link with ..
		{"dangling", "dangling"},                // a dangling link's key is the link itself
	} {
		t.Run(tc.rel, func(t *testing.T) {
			got, err := ts.Resolve(tc.rel, "/ws/"+tc.rel, "read")
			if err != nil {
				t.Fatal(err)
			}
			if got.Key != tc.key || got.Display != "/ws/"+tc.rel {
				t.Fatalf("Resolve(%q) = %+v, want key %q", tc.rel, got, tc.key)
			}
		})
	}
}

// A ".." inside a symlink's target applies to the link's target directory,
// as the kernel resolves it, not lexically.
func TestWalkDotDotAfterSymlink(t *testing.T) {
	ts := openTestStore(t)
	ts.put("real/sub/x", "x")
	ts.put("other/y", "y")
	must(t, os.Symlink("real/sub", ts.path("link")))
	must(t, os.Symlink("../../other/y", ts.path("real/sub/up")))
	key, err := ts.walk(splitPath("link/up"), "read", "/ws/link/up")
	if err != nil || key != "other/y" {
		t.Fatalf("walk = %q, %v; want other/y", key, err)
	}
}

func TestResolveKeyStableAcrossCreation(t *testing.T) {
	ts := openTestStore(t)
	must(t, os.Mkdir(ts.path("real"), 0o755))
	must(t, os.Symlink("real", ts.path("link")))
	before, err := ts.Resolve("link/sub/f.txt", "/ws/link/sub/f.txt", "write")
	must(t, err)
	ts.put("real/sub/f.txt", "now here")
	after, err := ts.Resolve("link/sub/f.txt", "/ws/link/sub/f.txt", "write")
	must(t, err)
	if before.Key != after.Key || after.Key != "real/sub/f.txt" {
		t.Fatalf("key before creation %q, after %q", before.Key, after.Key)
	}
}

func TestResolveRefusesEscapes(t *testing.T) {
	ts := openTestStore(t)
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), ts.path("abs-out")))
	must(t, os.Symlink("../../"+filepath.Base(outside), ts.path("rel-out")))
	must(t, os.Symlink(outside, ts.path("dir-out")))
	must(t, os.Symlink("/nonexistent-outside/x", ts.path("dangling-out")))
	for _, rel := range []string{"../x", "/etc/passwd", "abs-out", "rel-out/secret", "dir-out/secret", "dir-out/new", "dangling-out"} {
		_, err := ts.Resolve(rel, "/ws/"+rel, "write")
		wantErr(t, err, ReasonOutside, "write", "/ws/"+rel)
	}
}

func TestResolveErrors(t *testing.T) {
	ts := openTestStore(t)
	ts.put("file", "x")
	must(t, os.Symlink("loop2", ts.path("loop1")))
	must(t, os.Symlink("loop1", ts.path("loop2")))

	_, err := ts.Resolve("file/child", "/ws/file/child", "read")
	wantErr(t, err, ReasonParentNotDir, "resolve", "/ws/file/child")

	_, err = ts.Resolve("loop1", "/ws/loop1", "read")
	wantErr(t, err, ReasonIO, "resolve", "/ws/loop1", syscall.ELOOP)

	_, err = ts.Resolve("a\x00b", "/ws/a\x00b", "read")
	wantErr(t, err, ReasonNULByte, "resolve", "/ws/a\x00b")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The tools resolve paths in the daemon, so the kernel's protected_symlinks
// rule is theirs to apply: in a sticky, world-writable directory, a link is
// followed only if the daemon's user or the directory's owner owns it.
func TestResolveRefusesAnotherUsersLinkInASharedDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a link owned by another user")
	}
	ts := openTestStore(t)
	ts.put("secret.txt", "root's")
	for dir, mode := range map[string]os.FileMode{"pub": 0o777 | os.ModeSticky, "nosticky": 0o777, "nobodys": 0o777 | os.ModeSticky} {
		must(t, os.Mkdir(ts.path(dir), 0))
		must(t, os.Chmod(ts.path(dir), mode))
		must(t, os.Symlink("../secret.txt", ts.path(dir+"/link")))
		must(t, os.Lchown(ts.path(dir+"/link"), 65534, 65534))
	}
	must(t, os.Chown(ts.path("nobodys"), 65534, 65534))
	must(t, os.Symlink("../secret.txt", ts.path("pub/mine")))

	_, err := ts.Resolve("pub/link", "/ws/pub/link", "write")
	wantErr(t, err, ReasonPermission, "write", "/ws/pub/link")
	_, err = ts.Resolve("pub/link/../x", "/ws/pub/x", "read")
	wantErr(t, err, ReasonPermission, "read", "/ws/pub/x")
	for _, rel := range []string{"pub/mine", "nosticky/link", "nobodys/link"} {
		if got, err := ts.Resolve(rel, "/ws/"+rel, "read"); err != nil || got.Key != "secret.txt" {
			t.Errorf("Resolve(%s) = %+v, %v; want secret.txt", rel, got, err)
		}
	}
}
