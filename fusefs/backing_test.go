// The backing directory changed behind the mount's back: what the mount
// keeps of it, and the helpers that change it.

package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
)

// rewinder is the writer of the tests' restores and rewinds.
var rewinder = versionstore.Writer{Kind: versionstore.WriterRestore, Actor: "me"}

// putBacking writes rel straight into the backing directory.
func (m *mounted) putBacking(rel, content string) {
	m.t.Helper()
	p := filepath.Join(m.backing, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// getBacking reads rel straight from the backing directory.
func (m *mounted) getBacking(rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(m.backing, rel))
	return string(b), err
}

// seeFile has the store read rel, as a tool read would, so it knows the file.
func (m *mounted) seeFile(rel string) {
	m.t.Helper()
	tg, err := m.store.Resolve(rel, rel, "read")
	if err != nil {
		m.t.Fatal(err)
	}
	if _, err := m.store.Read(context.Background(), tg, func([]byte, bool) error { return nil }); err != nil {
		m.t.Fatal(err)
	}
}

// mkfifo through the mount leaves the "born absent" note Preserve made
// (Mknod commits nothing for a FIFO). When a regular file later takes the
// name — here written straight into the backing directory — a shell's
// append through the mount keeps nothing of it and is journaled as a
// creation: rewinding to a checkpoint taken while the file existed removes
// it, and its bytes are gone.
func TestFileAfterFifoAtTheSameNameIsKept(t *testing.T) {
	m := mountT(t, func(o *Options) {
		o.CacheTimeout = 50 * time.Millisecond
		o.selfWindow = time.Nanosecond // the backing changes below are nobody's own
	})
	if err := syscall.Mkfifo(filepath.Join(m.mnt, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(m.backing, "p")); err != nil {
		t.Fatal(err)
	}
	m.putBacking("p", "precious\n")
	if !testfuse.WaitFor(3*time.Second, func() bool {
		fi, err := os.Stat(filepath.Join(m.mnt, "p"))
		return err == nil && fi.Mode().IsRegular()
	}) {
		t.Fatal("the mount still shows the FIFO")
	}
	if _, err := m.store.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(m.mnt, "p"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("appended by a shell\n")
	f.Close()

	if kept, err := m.store.HasObject(versionstore.SumString("precious\n")); err != nil || !kept {
		t.Error("the bytes the file had were not kept before the mount changed it")
	}
	res, err := m.store.Rewind(context.Background(), "cp", versionstore.RewindOptions{Writer: rewinder})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.getBacking("p"); got != "precious\n" {
		t.Fatalf("rewind %+v: p = %q %v, want its bytes at the checkpoint", res, got, err)
	}
}
