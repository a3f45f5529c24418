package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// A file that existed before the mount, overwritten by a shell through it,
// is restorable to its original bytes with `dshfs show` and `dshfs restore`;
// a damaged object is reported by both and never written back.
func TestRestorePreexistingAndCorruptObject(t *testing.T) {
	testfuse.Require(t)
	backing, mnt, state := t.TempDir(), filepath.Join(t.TempDir(), "mnt"), t.TempDir()
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	orig := "written before dshfs started\n"
	if err := os.WriteFile(filepath.Join(backing, "old.txt"), []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(want int, args ...string) string {
		t.Helper()
		out, code := dshfs(t, state, args...)
		if code != want {
			t.Fatalf("dshfs %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return out
	}
	run(0, "mount", backing, mnt)
	t.Cleanup(func() {
		dshfs(t, state, "unmount", mnt)
		unix.Unmount(mnt, mntDetach)
	})
	path := filepath.Join(mnt, "old.txt")
	out, _ := inDir(mnt, "sh", "-c", "printf 'the shell was here\n' > old.txt").CombinedOutput()
	if len(out) != 0 {
		t.Fatalf("shell: %s", out)
	}
	v := versionstore.SumString(orig)
	if got := run(0, "show", path+"@"+v.String()); got != orig {
		t.Fatalf("show: %q", got)
	}
	short := strings.TrimPrefix(v.String(), "b3:")[:8]
	if got := run(0, "show", path+"@"+short); got != orig {
		t.Fatalf("show by prefix: %q", got)
	}
	// The shell's release commits its version (the kernel sends it after
	// the shell exited): the log waits 250 ms for it, a loaded machine may
	// send it later, and the restores below would wait for it too.
	shellV := versionstore.SumString("the shell was here\n")
	var log string
	testfuse.WaitFor(10*time.Second, func() bool { log = run(0, "log", path); return strings.Contains(log, shellV.Short()) })
	if !strings.Contains(log, "kept") || !strings.Contains(log, "baseline") || !strings.Contains(log, shellV.Short()) {
		t.Fatalf("log:\n%s", log)
	}
	if out := run(0, "restore", path, short); !strings.HasPrefix(out, "restored "+path+" to "+v.Short()) {
		t.Fatalf("restore: %q", out)
	}
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Fatalf("after restore: %q", b)
	}
	// Undo the restore: the shell's version comes back.
	run(0, "restore", path, shellV.String())
	if b, _ := os.ReadFile(path); string(b) != "the shell was here\n" {
		t.Fatalf("after undoing the restore: %q", b)
	}
	run(4, "show", path+"@"+"ffffffff")      // 4: not found
	run(2, "restore", path, "not-a-version") // 2: usage

	// Damage the original's object in the index: stop the daemon first (it
	// holds the index), flip a byte, mount again.
	run(0, "unmount", mnt)
	indexes, _ := filepath.Glob(filepath.Join(state, "dshfs", "*", "index.db"))
	if len(indexes) != 1 {
		t.Fatalf("index files: %v", indexes)
	}
	db, err := bolt.Open(indexes[0], 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("objects"))
		val := append([]byte(nil), b.Get(v[:])...)
		if len(val) == 0 {
			t.Fatal("the original's bytes are not in the object store")
		}
		val[len(val)-2] ^= 0x55
		return b.Put(v[:], val)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	run(0, "mount", backing, mnt)
	if out := run(3, "show", path+"@"+v.String()); !strings.Contains(out, "stored bytes are corrupt") {
		t.Fatalf("show of a damaged object: %q", out)
	}
	if out := run(3, "restore", path, v.String()); !strings.Contains(out, "stored bytes are corrupt") {
		t.Fatalf("restore of a damaged object: %q", out)
	}
	if b, _ := os.ReadFile(path); string(b) != "the shell was here\n" {
		t.Fatalf("a failed restore changed the file: %q", b)
	}
}
