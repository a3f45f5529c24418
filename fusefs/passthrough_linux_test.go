package fusefs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// As root on this kernel the mount is in passthrough mode (unless the tests
// run without it): the kernel writes and reads the backing file itself —
// not one WRITE or READ reaches the daemon — and the file's version is
// still the hash of its bytes once its writer is done.
func TestPassthroughWritesReachNoDaemonAndAreVersioned(t *testing.T) {
	var r requests
	m := mountT(t, counting(&r))
	if testNoPassthrough || os.Geteuid() != 0 {
		if m.fs.Passthrough() {
			t.Fatal("passthrough on, want off (not root, or DSHFS_TEST_PASSTHROUGH=off)")
		}
		return
	}
	if !m.fs.Passthrough() {
		t.Fatal("passthrough is off as root on Linux; want on (see the daemon's log for why)")
	}
	data := bytes.Repeat([]byte("passthrough\n"), 100_000)
	p := filepath.Join(m.mnt, "big")
	r.take()
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	m.waitUnmarked()
	n := r.take()
	if n["WRITE"] != 0 || n["READ"] != 0 || n["FLUSH"] != 0 {
		t.Errorf("requests %v: want no WRITE, READ or FLUSH in passthrough mode", n)
	}
	if h, _ := m.store.History("big"); len(h) == 0 || h[0].Version != versionstore.Sum(data) {
		t.Fatalf("history %+v, want the written bytes' version", h)
	}
}

// A shared writable mapping outlives its file's close: its writes reach
// the backing file after the last release. The file stays being written
// (a tool may not replace it) until the mapping is gone, and then its
// version is committed. In passthrough mode the mapping maps the backing
// file itself and the daemon hears nothing of it; without passthrough it
// keeps the mount's file open. The mapping lives in TestFsx's mapper
// process: a mapping in the daemon's own process can deadlock it.
func TestMappingThatOutlivesItsCloseIsVersioned(t *testing.T) {
	m := mountT(t)
	p := filepath.Join(m.mnt, "mapped")
	want := bytes.Repeat([]byte{'a'}, 8192)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	mapper, err := startMapper()
	if err != nil {
		t.Fatal(err)
	}
	defer mapper.stop()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mp := &fsxMap{id: 1, len: len(want)}
	_, err = mapper.call(mapperMap, mp, 0, int64(len(want)), nil, int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	late := []byte("written through a mapping after close")
	copy(want[100:], late)
	if _, err := mapper.call(mapperWrite, mp, 100, 0, late, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := mapper.call(mapperMsync, mp, 0, 0, nil, -1); err != nil {
		t.Fatal(err)
	}
	// With passthrough the kernel releases the file at close and the
	// mapping lingers; without, the mapping holds the file open.
	if m.fs.Passthrough() && !testfuse.WaitFor(5*time.Second, func() bool { return len(m.fs.writers.lingering()) == 1 }) {
		t.Fatal("the file's release did not leave it lingering behind its mapping")
	}
	tg, err := m.store.Resolve("mapped", "mapped", "write")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.store.WriteText(context.Background(), tg, "tool\n", versionstore.Intent{}, versionstore.ToolWriter("agent")); err == nil {
		t.Fatal("a tool replaced a file a live mapping still writes")
	}
	if _, err := mapper.call(mapperUnmap, mp, 0, 0, nil, -1); err != nil {
		t.Fatal(err)
	}
	if n := m.waitUnmarked(); n != 0 {
		t.Fatalf("%d files still being written after the mapping went", n)
	}
	if h, _ := m.store.History("mapped"); len(h) == 0 || h[0].Version != versionstore.Sum(want) {
		t.Fatalf("history %+v, want the mapping's bytes' version %s", h, versionstore.Sum(want))
	}
}

// Every open of a file is passthrough while one is, readers and writers
// alike (the kernel fails a mixed open with EIO): a reader, then a writer,
// then another reader of one file all work and see the same bytes.
func TestReadersAndWritersOfOneFileMix(t *testing.T) {
	m := mountT(t)
	p := filepath.Join(m.mnt, "mixed")
	if err := os.WriteFile(p, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r1, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("open for writing while a reader has the file: %v", err)
	}
	if _, err := w.WriteString("two\n"); err != nil {
		t.Fatal(err)
	}
	r2, err := os.Open(p)
	if err != nil {
		t.Fatalf("open for reading while a writer has the file: %v", err)
	}
	defer r2.Close()
	for _, r := range []*os.File{r1, r2} {
		buf := make([]byte, 64)
		n, err := r.ReadAt(buf, 0)
		if string(buf[:n]) != "one\ntwo\n" {
			t.Errorf("reader saw %q (%v), want both lines", buf[:n], err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	m.waitUnmarked()
	if h, _ := m.store.History("mixed"); len(h) == 0 || h[0].Version != versionstore.SumString("one\ntwo\n") {
		t.Fatalf("history %+v, want the appended version", h)
	}
}

// A file created in the mount's root while the mount is coming up is
// answered: the create holds the root's lock, which go-fuse's WaitMount
// needs for its lookup in the root, so the create must not wait for the
// end of Mount to learn whether it is passthrough (it did, and the daemon
// hung for good).
func TestCreateInTheRootWhileMounting(t *testing.T) {
	var backing string
	var abort *time.Timer // ends the connection if the daemon hangs
	created := make(chan error, 1)
	mounting := func(mnt string) {
		// Another process creates it: this one would meet go-fuse's poll
		// hack (the runtime polls an opened file) before it ran.
		sh := exec.Command("sh", "-c", `echo early > "$0"`, filepath.Join(mnt, "early"))
		go func() { created <- sh.Run() }()
		// Let the create reach the daemon: its backing file appears.
		if !testfuse.WaitFor(10*time.Second, func() bool { _, err := os.Lstat(filepath.Join(backing, "early")); return err == nil }) {
			t.Error("the early create never reached the daemon")
		}
		abort = time.AfterFunc(20*time.Second, func() { abortConnection(mnt) })
	}
	m := mountWith(t, func(b string) { backing = b }, func(o *Options) { o.afterServe = mounting })
	err := <-created
	abort.Stop()
	if err != nil {
		t.Fatalf("the create while mounting: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(m.mnt, "early")); string(b) != "early\n" {
		t.Fatalf("early: %q, %v", b, err)
	}
}

// abortConnection ends the FUSE connection of the mount at mnt, so that a
// hung daemon's callers fail instead of waiting for ever.
func abortConnection(mnt string) {
	if unix.Mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, "") == nil {
		defer unix.Unmount("/sys/fs/fuse/connections", 0)
	}
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mnt {
			_, minor, _ := strings.Cut(f[2], ":")
			os.WriteFile("/sys/fs/fuse/connections/"+minor+"/abort", []byte("1"), 0)
		}
	}
}
