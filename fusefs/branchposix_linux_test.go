package fusefs

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A name longer than NAME_MAX answers ENAMETOOLONG in a branch, as in the
// workspace (pjdfstest's */02.t), for a lookup and for every way of making
// one; a name of NAME_MAX bytes works.
func TestBranchNameMax(t *testing.T) {
	m, _ := fsxBranch(t, rand.New(rand.NewPCG(1, 2)))
	long := filepath.Join(m.mnt, strings.Repeat("x", 256))
	for what, err := range map[string]error{
		"lstat":   unix.Lstat(long, new(unix.Stat_t)),
		"create":  openClose(long, unix.O_CREAT|unix.O_WRONLY),
		"mkdir":   unix.Mkdir(long, 0o755),
		"mkfifo":  unix.Mkfifo(long, 0o644),
		"symlink": unix.Symlink("a", long),
		"link":    unix.Link(filepath.Join(m.mnt, "a"), long),
		"rename":  unix.Rename(filepath.Join(m.mnt, "a"), long),
		"unlink":  unix.Unlink(long),
	} {
		if !errors.Is(err, unix.ENAMETOOLONG) {
			t.Errorf("%s of a 256-byte name in a branch: %v; want ENAMETOOLONG", what, err)
		}
	}
	longest := filepath.Join(m.mnt, strings.Repeat("y", 255))
	must(t, os.WriteFile(longest, []byte("y\n"), 0o644))
	must(t, os.Remove(longest))
}

// A path of nearly PATH_MAX bytes below a branch's root works as in the
// workspace (pjdfstest's */03.t), though the view's layer lies deeper.
func TestBranchPathMax(t *testing.T) {
	m, _ := fsxBranch(t, rand.New(rand.NewPCG(1, 2)))
	root, err := unix.Open(m.mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(root)
	var parts []string
	for i := 0; i < 15; i++ { // 15 × 256 bytes, then a file: 4,095 bytes
		parts = append(parts, strings.Repeat(string(rune('a'+i)), 255))
		must(t, unix.Mkdirat(root, strings.Join(parts, "/"), 0o755))
	}
	dir := strings.Join(parts, "/")
	file := dir + "/" + strings.Repeat("f", 4095-len(dir)-1)
	fd, err := unix.Openat(root, file, unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatalf("create a file at %d bytes below a branch's root: %v", len(file), err)
	}
	_, err = unix.Write(fd, []byte("deep\n"))
	unix.Close(fd)
	must(t, err)
	var st unix.Stat_t
	must(t, unix.Fstatat(root, file, &st, unix.AT_SYMLINK_NOFOLLOW))
	if st.Size != 5 {
		t.Errorf("size %d; want 5", st.Size)
	}
	must(t, unix.Fchmodat(root, file, 0o600, 0))
	must(t, unix.Renameat(root, file, root, file[:len(file)-1]+"g"))
	must(t, unix.Linkat(root, file[:len(file)-1]+"g", root, file, 0))
	must(t, unix.Unlinkat(root, file, 0))
	must(t, unix.Unlinkat(root, file[:len(file)-1]+"g", 0))
	for i := len(parts); i > 0; i-- {
		must(t, unix.Unlinkat(root, strings.Join(parts[:i], "/"), unix.AT_REMOVEDIR))
	}
}

// A file unlinked while open keeps answering fstat, pread and pwrite on
// its descriptor in a branch, as in the workspace (pjdfstest's
// unlink/14.t): the file the branch started with and one new in it.
func TestBranchUnlinkedOpen(t *testing.T) {
	m, _ := fsxBranch(t, rand.New(rand.NewPCG(1, 2)))
	must(t, os.WriteFile(filepath.Join(m.mnt, "c"), []byte("c\n"), 0o644))
	for _, name := range []string{"a", "c"} {
		unlinkedOpen(t, filepath.Join(m.mnt, name))
	}
}

// unlinkedOpen opens p, unlinks it and uses the descriptor, which it
// closes before it returns, whatever fails: a descriptor of the test's
// own mount left open at exit would hang the test's exit.
func unlinkedOpen(t *testing.T, p string) {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Errorf("open %s: %v", p, err)
		return
	}
	defer unix.Close(fd)
	if err := unix.Unlink(p); err != nil {
		t.Errorf("unlink %s: %v", p, err)
		return
	}
	if _, err := unix.Pwrite(fd, []byte("written after unlink"), 0); err != nil {
		t.Errorf("pwrite %s after unlink: %v", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Nlink != 0 || st.Size < 20 {
		t.Errorf("fstat %s after unlink: nlink %d size %d, %v; want nlink 0, size ≥ 20", p, st.Nlink, st.Size, err)
	}
	buf := make([]byte, 20)
	if n, err := unix.Pread(fd, buf, 0); err != nil || string(buf[:max(n, 0)]) != "written after unlink" {
		t.Errorf("pread %s after unlink: %q, %v", p, buf[:max(n, 0)], err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after unlink: %v; want it gone", p, err)
	}
}

// The names of a hard-linked file in a branch are one inode: a change
// through one name shows at once through the other, and both have one
// inode number (pjdfstest's link/00.t, rename/00.t, unlink/00.t).
func TestBranchHardLinkOneInode(t *testing.T) {
	m, _ := fsxBranch(t, rand.New(rand.NewPCG(1, 2)))
	must(t, os.WriteFile(filepath.Join(m.mnt, "c"), []byte("c\n"), 0o644))
	for _, name := range []string{"a", "c"} { // the workspace's file, and one new in the branch
		p, q := filepath.Join(m.mnt, name), filepath.Join(m.mnt, name+"-link")
		var st, lt unix.Stat_t
		must(t, unix.Lstat(p, &st)) // cached now
		must(t, unix.Link(p, q))
		must(t, unix.Lstat(q, &lt))
		must(t, unix.Chmod(q, 0o600))
		must(t, unix.Chown(q, 65534, 65534))
		must(t, unix.Lstat(p, &st))
		if st.Ino != lt.Ino || st.Mode&0o777 != 0o600 || st.Uid != 65534 || st.Nlink != 2 {
			t.Errorf("%s after link, chmod and chown of its link: ino %d (link's %d) mode %o uid %d nlink %d; want one inode, 600, 65534, 2",
				name, st.Ino, lt.Ino, st.Mode&0o777, st.Uid, st.Nlink)
		}
		must(t, unix.Unlink(p))
		if err := unix.Lstat(q, &lt); err != nil || lt.Nlink != 1 {
			t.Errorf("%s's link after unlink of %s: nlink %d, %v; want 1", name, name, lt.Nlink, err)
		}
	}
}

func openClose(p string, flags int) error {
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0o644)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// A directory made in a branch renames as in the workspace (pjdfstest's
// rename/00.t, 20.t, 24.t): with what it holds, over an empty directory but
// not a full one, and into another directory, whose link counts and ".."
// follow.
func TestBranchRenameOwnDir(t *testing.T) {
	m, _ := fsxBranch(t, rand.New(rand.NewPCG(1, 2)))
	p := func(rel string) string { return filepath.Join(m.mnt, rel) }
	must(t, os.MkdirAll(p("d/sub"), 0o755))
	must(t, os.WriteFile(p("d/f"), []byte("f\n"), 0o644))
	must(t, os.Rename(p("d"), p("e")))
	if b, err := os.ReadFile(p("e/f")); err != nil || string(b) != "f\n" {
		t.Errorf("e/f after renaming d to e: %q, %v", b, err)
	}
	if _, err := os.Lstat(p("d")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("d after its rename: %v; want it gone", err)
	}
	must(t, os.Mkdir(p("full"), 0o755))
	must(t, os.WriteFile(p("full/x"), nil, 0o644))
	if err := unix.Rename(p("e"), p("full")); !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		t.Errorf("rename of a directory over a full one: %v; want ENOTEMPTY or EEXIST", err)
	}
	must(t, os.Mkdir(p("empty"), 0o755))
	must(t, unix.Rename(p("e"), p("empty"))) // os.Rename refuses any directory as its target
	must(t, os.Rename(p("empty/sub"), p("full/sub")))
	var st, sub, dotdot unix.Stat_t
	must(t, unix.Lstat(p("empty"), &st))
	must(t, unix.Lstat(p("full"), &sub))
	must(t, unix.Lstat(p("full/sub/.."), &dotdot))
	if st.Nlink != 2 || sub.Nlink != 3 || dotdot.Ino != sub.Ino {
		t.Errorf("after moving empty/sub to full/sub: nlink %d and %d, full/sub/..'s inode %d; want 2, 3, full's %d", st.Nlink, sub.Nlink, dotdot.Ino, sub.Ino)
	}
	must(t, os.Remove(p("full/sub")))
	must(t, os.Mkdir(p("empty/again"), 0o755)) // a name the moved directory had is free again
	if ents, err := os.ReadDir(p("empty")); err != nil || len(ents) != 2 {
		t.Errorf("empty after it all: %v, %v; want again and f", ents, err)
	}
}

// A directory the branch starts with (the workspace's) answers EXDEV to a
// rename, as across filesystems: mv copies it.
func TestBranchRenameWorkspaceDirIsEXDEV(t *testing.T) {
	ws := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(ws, "w", "sub"), 0o755))
	v := unmountedView(t, ws)
	if errno := v.renameDir("w", "moved", 0); errno != unix.EXDEV {
		t.Errorf("rename of the workspace's directory w: %v; want EXDEV", errno)
	}
	if errno := v.renameDir("w/sub", "sub", 0); errno != unix.EXDEV {
		t.Errorf("rename of the workspace's directory w/sub: %v; want EXDEV", errno)
	}
}
