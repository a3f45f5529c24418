package fusefs

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A FIFO and a Unix socket made in a branch are the branch's own, as in
// the workspace (pjdfstest makes both in every test of mkfifo, mknod, link,
// rename, unlink and open).
func TestBranchMknod(t *testing.T) {
	m, _ := fsxBranch(t, rand.New(rand.NewPCG(1, 2)))
	fifo, sock := filepath.Join(m.mnt, "fifo"), filepath.Join(m.mnt, "sock")
	if err := unix.Mkfifo(fifo, 0o640); err != nil {
		t.Fatalf("mkfifo in a branch: %v", err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("bind a socket in a branch: %v", err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	for path, want := range map[string]os.FileMode{fifo: os.ModeNamedPipe, sock: os.ModeSocket} {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode().Type() != want {
			t.Fatalf("lstat %s: %v, %v; want a %v", path, fi, err, want)
		}
		if _, err := os.Lstat(filepath.Join(m.backing, filepath.Base(path))); err != nil {
			t.Fatalf("the view does not show %s: %v", filepath.Base(path), err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatalf("unlink %s: %v", path, err)
		}
	}
}

// A hard link made in a branch shows at once in the link count of the name
// linked to, as in the workspace (pjdfstest's link/00.t and rename/00.t
// stat it right after link(2)).
func TestBranchLinkCount(t *testing.T) {
	m, _ := fsxBranch(t, rand.New(rand.NewPCG(1, 2)))
	for _, name := range []string{"a", "c"} { // the workspace's file, and one new in the branch
		p := filepath.Join(m.mnt, name)
		if name == "c" {
			must(t, os.WriteFile(p, []byte("c\n"), 0o644))
		}
		var st unix.Stat_t
		must(t, unix.Lstat(p, &st)) // cached now
		for i, want := range []uint64{2, 3} {
			must(t, os.Link(p, p+"-link"+string(rune('1'+i))))
			if err := unix.Lstat(p, &st); err != nil || st.Nlink != want {
				t.Fatalf("lstat %s after %d links: nlink %d, %v; want %d", name, i+1, st.Nlink, err, want)
			}
		}
	}
}
