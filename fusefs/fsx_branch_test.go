//go:build linux

package fusefs

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"golang.org/x/sys/unix"
)

// TestFsxBranch is TestFsx inside a branch, served as the daemon serves
// one (daemon/branches.go): a workspace mount, a branch view of its
// snapshot, and an ordinary mount over the view, with the branch mount's
// options (no watcher, a 30 s cache). Kernel passthrough, which the daemon
// asks for as root, is unavailable over the view (the O_TMPFILE probe
// fails there), so every read and write goes through the daemon, as in
// TestFsx's writethrough mode. Of the three files, a is the workspace's,
// unchanged since the branch point (the view serves the workspace's file
// until the first change copies it up), b was changed in the workspace
// after the branch point (the view serves, and copies up, its bytes then,
// frozen), and c is new in the branch. Every check of TestFsx holds, the
// backing directory being the view, and the workspace's files keep their
// bytes. The same seeds and DSHFS_FSX_* settings as TestFsx; the default
// run is part of make test.
func TestFsxBranch(t *testing.T) {
	runFsxModes(t, []fsxMode{{name: "branch", branch: true}})
}

// fsxBranch mounts a branch of a fresh workspace whose files a and b it
// fills from rng; it returns the branch's mount and the bytes a and b have
// in the branch. At cleanup it checks that the workspace kept them.
func fsxBranch(t *testing.T, rng *rand.Rand, opts ...func(*Options)) (*mounted, map[string][]byte) {
	t.Helper()
	ws := mountT(t)
	start := map[string][]byte{}
	for _, name := range []string{"a", "b"} {
		start[name] = fsxBytes(rng, rng.IntN(fsxMaxOp))
		must(t, os.WriteFile(filepath.Join(ws.mnt, name), start[name], 0o644))
	}
	waitCommitted(t, ws)
	if _, err := ws.store.MarkCheckpoint("branch:fsx"); err != nil {
		t.Fatal(err)
	}
	changed := []byte("b, changed in the workspace after the branch point\n")
	must(t, os.WriteFile(filepath.Join(ws.mnt, "b"), changed, 0o644))
	waitCommitted(t, ws)
	snap, err := ws.store.Snapshot("branch:fsx")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"upper", "frozen", "view"} {
		must(t, os.Mkdir(filepath.Join(dir, d), 0o700))
	}
	view, err := MountBranchView(filepath.Join(dir, "view"), ws.store, snap, BranchViewOptions{
		Upper: filepath.Join(dir, "upper"), Frozen: filepath.Join(dir, "frozen"), Index: filepath.Join(dir, "index.json")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		waitUnused(t, filepath.Join(dir, "view"))
		if err := view.Unmount(); err != nil {
			t.Errorf("unmount the view: %v", err)
		}
		wantBytes(t, filepath.Join(ws.mnt, "a"), start["a"])
		wantBytes(t, filepath.Join(ws.mnt, "b"), changed)
	})
	branchOpts := append([]func(*Options){func(o *Options) { o.NoWatch, o.CacheTimeout = true, 30*time.Second }}, opts...)
	return mountAt(t, filepath.Join(dir, "view"), nil, branchOpts...), start
}

// waitUnused waits (up to 10 s) until this process holds no descriptor of
// a file below dir, so that the view unmounts rather than being detached
// busy. The branch's mount closes its descriptors of the view's files as
// the kernel releases them, just after its unmount returns; a release the
// kernel had not sent yet at the unmount is lost, and its descriptor stays
// open until the process ends, which it may (the view answers no FLUSH:
// TestBranchViewExitWithAFileOpen).
func waitUnused(t *testing.T, dir string) {
	t.Helper()
	var open []string
	unused := func() bool {
		open = open[:0]
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, dir+"/") {
				open = append(open, l)
			}
		}
		return len(open) == 0
	}
	if !testfuse.WaitFor(10*time.Second, unused) {
		t.Logf("the branch's mount still holds %v, its release lost at its unmount: the view is detached busy", open)
	}
}

// waitCommitted waits for the workspace's writes to be committed: the
// kernel releases a file after close(2) returns.
func waitCommitted(t *testing.T, m *mounted) {
	t.Helper()
	if !testfuse.WaitFor(30*time.Second, func() bool { return m.waitUnmarked() == 0 }) {
		t.Fatal("the workspace's writes were not committed within 30 s")
	}
}

func wantBytes(t *testing.T, path string, want []byte) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != string(want) {
		t.Errorf("%s: %d bytes (%v), want its %d bytes as they were", path, len(b), err, len(want))
	}
}

func fsxBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// adopt takes a file the branch starts with as one of the run's: a first
// write at a random offset copies it up and gives it a version of the
// branch's own.
func (r *fsxRun) adopt(name string, data []byte) {
	f := &fsxFile{name: name, reader: -1, data: slices.Clone(data)} // the model changes in place
	r.files = append(r.files, f)                                    // its reader is closed at teardown
	r.checkFile(f)
	fd, err := unix.Open(r.mntPath(f), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.fatalf("open %s: %v", name, err)
	}
	defer unix.Close(fd)
	at, b := int64(r.rng.IntN(len(data)+1)), r.bytes(1+r.rng.IntN(fsxMaxOp/4))
	if n, err := unix.Pwrite(fd, b, at); err != nil || n != len(b) {
		r.fatalf("pwrite %s: %d, %v", name, n, err)
	}
	r.model(f, at, b)
	r.note("adopt %s (%d bytes at the branch point): %d bytes at %d", name, len(data), len(b), at)
}
