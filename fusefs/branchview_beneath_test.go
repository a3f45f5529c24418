package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// unmountedView is a branch view of the workspace ws at a checkpoint made
// now, not mounted: its methods are called directly.
func unmountedView(t *testing.T, ws string) *BranchView {
	t.Helper()
	state := t.TempDir()
	st, err := versionstore.Open(ws, filepath.Join(state, "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.MarkCheckpoint("branch:x"); err != nil {
		t.Fatal(err)
	}
	snap, err := st.Snapshot("branch:x")
	if err != nil {
		t.Fatal(err)
	}
	bd := t.TempDir()
	for _, d := range []string{"upper", "frozen"} {
		must(t, os.Mkdir(filepath.Join(bd, d), 0o700))
	}
	idx, err := loadBranchIndex(filepath.Join(bd, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	return newBranchView(st, snap, idx, filepath.Join(bd, "upper"), filepath.Join(bd, "frozen"))
}

// A workspace directory swapped for a symlink after the branch point (by
// a user who may write the workspace) is not followed by the view: its
// open, stat and copy-up of a file below it are refused, and nothing of
// where the link points reaches the branch.
func TestBranchViewLowerSymlinkParent(t *testing.T) {
	ws, secret := t.TempDir(), t.TempDir()
	must(t, os.Mkdir(filepath.Join(ws, "shared"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "shared", "x"), []byte("workspace x\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(secret, "x"), []byte("secret\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(secret, "only-secret"), nil, 0o600))
	must(t, os.Symlink("secret-target", filepath.Join(secret, "l")))
	v := unmountedView(t, ws)
	must(t, os.Rename(filepath.Join(ws, "shared"), filepath.Join(ws, "shared.old")))
	must(t, os.Symlink(secret, filepath.Join(ws, "shared")))

	if src, err := v.resolve("shared/x"); err == nil {
		if fd, err := src.open(syscall.O_RDONLY); err == nil {
			syscall.Close(fd)
			t.Errorf("open shared/x through the symlinked directory succeeded")
		}
	}
	var attr fuse.Attr
	if errno := v.stat("shared/x", &attr); errno == 0 {
		t.Errorf("stat shared/x through the symlinked directory succeeded (size %d)", attr.Size)
	}
	if err := v.copyUp("shared/x", false); err == nil {
		t.Errorf("copy-up of shared/x through the symlinked directory succeeded")
	}
	if ents, _ := v.list("shared"); len(ents) > 0 {
		t.Errorf("list shared through the symlink: %v", ents)
	}
	if target, err := readlinkBeneath(v.lower, "shared/l"); err == nil {
		t.Errorf("readlink shared/l through the symlinked directory: %q", target)
	}
	if b, err := os.ReadFile(filepath.Join(v.upper, "shared", "x")); err == nil {
		t.Errorf("the branch holds %q from where the link points", b)
	}
}

// A copy-up keeps the owner, group and permission bits, setgid and sticky
// included, of the file and the directories it copies.
func TestBranchCopyUpKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to nobody")
	}
	ws := t.TempDir()
	must(t, os.Mkdir(filepath.Join(ws, "d"), 0o750))
	must(t, os.Chown(filepath.Join(ws, "d"), 65534, 65534))
	must(t, os.Chmod(filepath.Join(ws, "d"), 0o750|os.ModeSetgid))
	must(t, os.WriteFile(filepath.Join(ws, "d", "f"), []byte("f\n"), 0o640))
	must(t, os.Chown(filepath.Join(ws, "d", "f"), 65534, 65534))
	must(t, os.Mkdir(filepath.Join(ws, "shared"), 0o777))
	must(t, os.Chmod(filepath.Join(ws, "shared"), 0o777|os.ModeSticky))
	v := unmountedView(t, ws)

	must(t, v.copyUp("d/f", false))
	must(t, v.copyUp("shared", false))
	for _, c := range []struct {
		rel  string
		uid  uint32
		mode uint32
	}{{"d", 65534, 0o2750}, {"d/f", 65534, 0o640}, {"shared", 0, 0o1777}} {
		var st syscall.Stat_t
		must(t, syscall.Lstat(filepath.Join(v.upper, c.rel), &st))
		if st.Uid != c.uid || st.Gid != c.uid || uint32(st.Mode)&0o7777 != c.mode {
			t.Errorf("upper %s: uid %d gid %d mode %o; want %d:%d %o", c.rel, st.Uid, st.Gid, uint32(st.Mode)&0o7777, c.uid, c.uid, c.mode)
		}
	}
}

// A merge takes the branch's regular files with their permission bits,
// and leaves out a FIFO (never opened to block) and a symlink.
func TestBranchChangesRegularOnly(t *testing.T) {
	v := unmountedView(t, t.TempDir())
	must(t, os.WriteFile(filepath.Join(v.upper, "secret.env"), []byte("TOKEN=1\n"), 0o600))
	must(t, os.Chmod(filepath.Join(v.upper, "secret.env"), 0o600))
	must(t, syscall.Mkfifo(filepath.Join(v.upper, "fifo"), 0o600))
	must(t, os.Symlink("/etc/hostname", filepath.Join(v.upper, "link")))
	changes, err := v.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Key != "secret.env" || changes[0].Perm != 0o600 || string(changes[0].Data) != "TOKEN=1\n" {
		t.Errorf("changes %+v; want secret.env alone, 0600", changes)
	}
}

// A workspace file changed after the branch point whose change is not
// journaled yet (a release the kernel sends after the close returned, or a
// write behind dshfs's back the watcher has not seen) shows in the branch
// as it was at the branch point, not as it is now.
func TestBranchViewUnjournaledChangeKeepsTheBranchPoint(t *testing.T) {
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "a"), []byte("then\n"), 0o644))
	v := unmountedView(t, ws)
	tg, err := v.store.Resolve("a", "a", "read")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.store.ReadBytes(context.Background(), tg, 1<<20); err != nil { // records its version, keeping its bytes
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(ws, "a"), []byte("now, changed\n"), 0o644))
	src, err := v.resolve("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src.path)
	if err != nil || string(b) != "then\n" {
		t.Fatalf("the branch shows %q, %v; want the branch point's %q", b, err, "then\n")
	}
}

// A merge takes a branch's file however deep below the branch's root it
// lies, though the layer's own path makes its whole path longer than
// PATH_MAX.
func TestBranchChangesDeepPath(t *testing.T) {
	v := unmountedView(t, t.TempDir())
	dir, err := unix.Open(v.upper, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	var key []string
	for i := range 16 { // 4,079 bytes below the layer, and a file
		name := strings.Repeat(string(rune('a'+i)), min(255, 4079-256*i))
		key = append(key, name)
		must(t, unix.Mkdirat(dir, name, 0o755))
		next, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(dir)
		must(t, err)
		dir = next
	}
	fd, err := unix.Openat(dir, "f", unix.O_CREAT|unix.O_WRONLY, 0o644)
	unix.Close(dir)
	must(t, err)
	_, err = unix.Write(fd, []byte("deep\n"))
	unix.Close(fd)
	must(t, err)
	changes, err := v.Changes()
	want := strings.Join(append(key, "f"), "/")
	if err != nil || len(changes) != 1 || changes[0].Key != want || string(changes[0].Data) != "deep\n" {
		t.Fatalf("changes of a branch with a file %d bytes deep: %d, %.200v; want that file", len(want), len(changes), err)
	}
}

// A file open for writing in a directory renamed is counted as written
// under its new path, and no longer once released.
func TestBranchRenameMovesWriters(t *testing.T) {
	v := unmountedView(t, t.TempDir())
	fd, err := unix.Open(os.DevNull, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	must(t, err)
	h := v.handle(fd, "d/f", 5, true) // owns fd: closed by its release
	defer h.FileHandle.(fs.FileReleaser).Release(context.Background())
	v.moveHandles("d", "e")
	if w := v.Writing(); len(w) != 1 || !w["e/f"] {
		t.Errorf("writing after renaming d to e: %v; want e/f", w)
	}
	v.release(h)
	if w := v.Writing(); len(w) != 0 {
		t.Errorf("writing after the release: %v; want none", w)
	}
}
