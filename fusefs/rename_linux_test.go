// Names changed behind the kernel's back on a shared mount: operations
// and renames on a name the kernel has stale.

package fusefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// Operations by name ran as root on whatever the backing name held, while
// the kernel had checked the caller against the entry it cached for the
// name. When root put its own file or directory in place of the caller's,
// straight in the backing directory and within the watcher's 100 ms (so
// the kernel kept the caller's entry), the caller could unlink, remove,
// rename, hard-link, chmod or set extended attributes on root's entry, or
// look up, list and create inside root's private directory — none of which
// the sticky bit, root's ownership and the mode allow natively.
func TestOpsOnANameSwappedBehindTheKernel(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  bool
		op   func(p string) error // p is the name in the mount, as nobody
		want syscall.Errno        // 0: any error
	}{
		{"unlink", false, syscall.Unlink, syscall.EPERM},
		{"rmdir", true, syscall.Rmdir, syscall.EPERM},
		{"rename", false, func(p string) error { return os.Rename(p, p+".moved") }, syscall.EPERM},
		{"rename-over", false, func(p string) error {
			if err := os.WriteFile(p+".src", nil, 0o644); err != nil {
				return err
			}
			return os.Rename(p+".src", p)
		}, syscall.EPERM},
		{"link", false, func(p string) error { return os.Link(p, p+".link") }, syscall.EPERM},
		{"chmod", false, func(p string) error { return os.Chmod(p, 0o666) }, syscall.EPERM},
		{"chgrp", false, func(p string) error { return os.Lchown(p, -1, nobody) }, syscall.EPERM},
		{"utimes", false, func(p string) error { return unix.UtimesNano(p, make([]unix.Timespec, 2)) }, syscall.EPERM},
		{"truncate", false, func(p string) error { return os.Truncate(p, 0) }, syscall.EACCES},
		{"setxattr", false, func(p string) error { return unix.Lsetxattr(p, "user.k", []byte("v"), 0) }, syscall.EACCES},
		{"lookup-inside", true, func(p string) error { _, err := os.Lstat(p + "/f"); return err }, syscall.EACCES},
		{"create-inside", true, func(p string) error { return os.WriteFile(p+"/f", nil, 0o644) }, syscall.EACCES},
		{"readdir", true, func(p string) error { _, err := os.ReadDir(p); return err }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mountShared(t)
			m.mine("pub/n", tc.dir)
			e := m.swapIn("pub/n", tc.dir)
			var err error
			asNobody(t, func() { err = tc.op(filepath.Join(m.mnt, "pub/n")) })
			m.wantIntact("pub/n", e)
			for _, left := range []string{"pub/n.moved", "pub/n.link", "pub/n/f"} {
				if _, lerr := os.Lstat(filepath.Join(m.backing, left)); lerr == nil {
					t.Errorf("%s exists", left)
				}
			}
			if err == nil || tc.want != 0 && !errors.Is(err, tc.want) {
				t.Fatalf("%s of root's entry as nobody: %v, want %v", tc.name, err, errnoOrAny(tc.want))
			}
		})
	}
}

// A rename onto a name the kernel believed absent (a stale negative entry)
// replaced whatever the backing directory held there: root's file, in a
// sticky directory where nobody may not replace it.
func TestRenameOntoAStaleNegativeEntry(t *testing.T) {
	m := mountShared(t)
	m.staleAbsent("pub/t")
	e := m.putSecret("pub/t")
	var err error
	asNobody(t, func() {
		if err = os.WriteFile(filepath.Join(m.mnt, "pub/src"), nil, 0o644); err == nil {
			err = os.Rename(filepath.Join(m.mnt, "pub/src"), filepath.Join(m.mnt, "pub/t"))
		}
	})
	m.wantIntact("pub/t", e)
	if !errors.Is(err, syscall.EPERM) {
		t.Fatalf("rename onto root's file as nobody: %v, want EPERM", err)
	}
}

// RENAME_EXCHANGE of a file and a directory is handled by the source's type
// alone: with a file as the source, the index keeps the file's record at
// the path that is now a directory, leaves the directory's entries under
// the old name, and journals neither move. A rewind then neither restores
// the paths nor reports them as conflicts.
func TestExchangeFileWithDirectory(t *testing.T) {
	m := mountT(t)
	m.putBacking("a", "A\n")
	m.putBacking("b/x", "X\n")
	m.seeFile("a")
	m.seeFile("b/x")
	if _, err := m.store.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(m.mnt, "a"), unix.AT_FDCWD, filepath.Join(m.mnt, "b"), unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("RENAME_EXCHANGE: %v", err)
	}
	res, err := m.store.Rewind(context.Background(), "cp", versionstore.RewindOptions{Writer: rewinder})
	if err != nil {
		t.Fatal(err)
	}
	conflict := map[string]bool{}
	for _, a := range res.Actions {
		if a.Err != nil {
			conflict[a.Path] = true
		}
	}
	for rel, want := range map[string]string{"a": "A\n", "b/x": "X\n"} {
		if got, _ := m.getBacking(rel); got != want && !conflict[rel] {
			t.Errorf("after rewind %s = %q, want %q or a conflict (rewind %+v)", rel, got, want, res)
		}
	}
}
