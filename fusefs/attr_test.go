package fusefs

import (
	"log"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSetattrRepliesAreCached: the attributes a chmod or utimes returns are
// fresh, so the stat that follows needs no GETATTR. (A chown is preceded by
// the kernel's own GETATTR, to clear set-id bits, unless the daemon takes
// that over with HANDLE_KILLPRIV, which dshfs does not negotiate.)
func TestSetattrRepliesAreCached(t *testing.T) {
	ops := &opcodes{n: map[string]int{}}
	m := mountT(t, func(o *Options) { o.Debug, o.DebugLog = true, log.New(ops, "", 0) })
	p := filepath.Join(m.mnt, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, set := range []func() error{
		func() error { return os.Chmod(p, 0o600) },
		func() error { return f.Chmod(0o640) },
		func() error { return os.Chtimes(p, time.Unix(1, 0), time.Unix(2, 0)) },
	} {
		ops.take()
		if err := set(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Stat(); err != nil {
			t.Fatal(err)
		}
		if n := ops.take(); n["SETATTR"] != 1 || n["GETATTR"] != 0 {
			t.Errorf("change %d: requests %v, want one SETATTR and no GETATTR", i, n)
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 || fi.ModTime().Unix() != 2 {
		t.Errorf("mode %v mtime %v: the cached attributes are not the ones set", fi.Mode(), fi.ModTime())
	}
}
