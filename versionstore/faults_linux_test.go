package versionstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// requireRoot skips a test that needs root (mounts, dropping privileges)
// outside CI; in CI, where tests run as root, a skip would hide a failure.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test needs root, and CI runs as root")
	}
	t.Skip("needs root")
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts it
// at cleanup, even if the test fails.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	requireRoot(t)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount tmpfs: %v", err)
		}
	})
	return dir
}

// A full disk fails the write or edit with FS_IO_ERROR and a plain reason;
// the original bytes and version stay, and no temp file is left.
func TestFullDisk(t *testing.T) {
	ts := openTestStoreAt(t, mountTmpfs(t, "64k"))
	ts.put("f.txt", "original\n")
	v := ts.version("f.txt")
	big := strings.Repeat("x", 1<<20)

	_, err := ts.write("f.txt", big, replaceAt(v))
	wantErr(t, err, ReasonIO, "write", "/ws/f.txt", syscall.ENOSPC)
	_, err = ts.edit("f.txt", Edit{Old: "original", New: big}, &v)
	wantErr(t, err, ReasonIO, "", "/ws/f.txt", syscall.ENOSPC)
	_, err = ts.write("new.txt", big, createOnly)
	wantErr(t, err, ReasonIO, "write", "/ws/new.txt", syscall.ENOSPC)

	if ts.get("f.txt") != "original\n" || ts.version("f.txt") != v {
		t.Fatal("original changed")
	}
	if _, err := os.Stat(ts.path("new.txt")); !os.IsNotExist(err) {
		t.Fatal("a failed create left a file")
	}
	noTemps(t, ts.dir)
	// Space is back once the failed attempts are cleaned up.
	if _, err := ts.write("f.txt", "fits", replaceAt(v)); err != nil {
		t.Fatalf("small write after the failures: %v", err)
	}
}

// A read-only mount gives EROFS: FS_IO_ERROR with the errno's text.
func TestReadOnlyFilesystem(t *testing.T) {
	dir := mountTmpfs(t, "1m")
	must(t, os.WriteFile(dir+"/f.txt", []byte("original"), 0o644))
	must(t, syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))
	ts := openTestStoreAt(t, dir)
	v := ts.version("f.txt")
	_, err := ts.write("f.txt", "new", replaceAt(v))
	wantErr(t, err, ReasonIO, "write", "/ws/f.txt", syscall.EROFS)
	_, err = ts.edit("f.txt", Edit{Old: "original", New: "new"}, &v)
	wantErr(t, err, ReasonIO, "", "/ws/f.txt", syscall.EROFS)
	if ts.get("f.txt") != "original" {
		t.Fatal("original changed")
	}
}

// A directory the caller may not write into gives FS_PERMISSION_DENIED. As
// root the test drops to an unprivileged filesystem uid on one thread, which
// also drops the capabilities that bypass permission bits.
func TestReadOnlyDirectory(t *testing.T) {
	ts := openTestStore(t)
	ts.put("ro/f.txt", "original")
	v := ts.version("ro/f.txt")
	must(t, os.Chmod(ts.dir, 0o755))
	must(t, os.Chmod(ts.path("ro"), 0o555))
	t.Cleanup(func() { os.Chmod(ts.path("ro"), 0o755) })

	var werr, eerr error
	asNobody(t, func() {
		_, werr = ts.write("ro/f.txt", "new", replaceAt(v))
		_, eerr = ts.edit("ro/f.txt", Edit{Old: "original", New: "new"}, &v)
	})
	wantErr(t, werr, ReasonPermission, "write", "/ws/ro/f.txt")
	wantErr(t, eerr, ReasonPermission, "", "/ws/ro/f.txt")
	if ts.get("ro/f.txt") != "original" || ts.version("ro/f.txt") != v {
		t.Fatal("original changed")
	}
	noTemps(t, ts.dir)
}

// A failed snapshot (an unreadable file) must not be recorded as a deletion.
func TestFailedEditRecordsNothing(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f", "x")
	ts.version("f")
	must(t, os.Chmod(ts.dir, 0o755))
	must(t, os.Chmod(ts.path("f"), 0o000))
	var err error
	asNobody(t, func() { _, err = ts.edit("f", Edit{Old: "x", New: "y"}, nil) })
	wantErr(t, err, ReasonPermission, "", "/ws/f")
	h, herr := ts.History("f")
	must(t, herr)
	if len(h) != 1 || h[0].Deleted {
		t.Fatalf("history = %+v: a failed read was recorded as a deletion", h)
	}
}

// asNobody runs fn with filesystem uid and gid 65534 when running as root
// (directly otherwise). The thread is locked and never returned to the
// scheduler, so no other goroutine can inherit the identity.
func asNobody(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		fn()
		return
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
		if err := syscall.Setfsgid(65534); err != nil {
			done <- err
			return
		}
		if err := syscall.Setfsuid(65534); err != nil {
			done <- err
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("drop privileges: %v", err)
	}
}

// fill writes a file in dir until the filesystem is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	must(t, err)
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			chunk = chunk[:len(chunk)/2]
		}
	}
}

// With the state directory's disk full, the index cannot record what a
// walk of the workspace finds: Sync, Checkpoint and Rewind fail with the
// commit's error instead of reporting success. (The batch's failure used to
// be logged only: a checkpoint pinned an index that did not know the new
// files, and a rewind said "0 conflict(s)" while it neither indexed nor
// removed them.)
func TestFullStateDiskFailsSync(t *testing.T) {
	state := mountTmpfs(t, "1m")
	ts := &testStore{t: t, dir: t.TempDir(), index: filepath.Join(state, "index.db")}
	ts.open()
	t.Cleanup(func() { ts.Close() })
	ts.put("a.txt", "one\n")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	fill(t, state)
	r := rand.NewChaCha8([32]byte{7})
	for i := range 300 {
		b := make([]byte, 4<<10) // incompressible: the batch needs new pages
		r.Read(b)
		ts.put(fmt.Sprintf("new/%03d.bin", i), string(b))
	}
	ts.put("a.txt", "two\n")

	if st, err := ts.Sync(context.Background(), nil); err == nil {
		t.Fatalf("sync on a full state disk: %+v, no error", st)
	} else {
		wantErr(t, err, ReasonIndex, "sync", "", syscall.ENOSPC)
	}
	if cp, err := ts.Checkpoint(context.Background(), "full", nil); err == nil {
		t.Fatalf("checkpoint on a full state disk: %+v, no error", cp)
	}
	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	if err == nil {
		t.Fatalf("rewind on a full state disk: %+v, no error", res)
	}
	if got := ts.get("a.txt"); got != "two\n" {
		t.Errorf("a failed rewind changed a.txt to %q", got)
	}
}

// A full state disk at open fails the open with ENOSPC and moves nothing:
// index.db stays with its history and checkpoints, and once there is room
// the next open finds them all. (The open's first commit, which clears the
// clean mark, used to be taken for damage: the healthy index was moved
// aside, and the next start created an empty one in its place.)
func TestFullStateDiskAtOpenKeepsIndex(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("crashed=%v", crashed), func(t *testing.T) {
			state := mountTmpfs(t, "1m")
			ts := &testStore{t: t, dir: t.TempDir(), index: filepath.Join(state, "index.db")}
			ts.open()
			fillIndex(ts, 80)
			cp, err := ts.Checkpoint(context.Background(), "before", nil)
			must(t, err)
			name := "d01/" + strings.Repeat("file", 40) + "-0001.txt"
			if crashed {
				ts.crash()
			} else {
				must(t, ts.Close())
			}
			punchFreePages(t, ts.index)
			fill(t, state)

			s, err := Open(ts.dir, ts.index, Options{})
			if err == nil {
				s.Close()
				t.Fatal("open on a full state disk: no error")
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("open on a full state disk: %v, want ENOSPC", err)
			}
			if aside, _ := filepath.Glob(ts.index + ".*"); len(aside) != 0 {
				t.Errorf("a full disk moved or copied the index: %v", aside)
			}
			if _, err := os.Stat(ts.index); err != nil {
				t.Fatalf("index after the failed open: %v", err)
			}

			must(t, os.Remove(filepath.Join(state, "filler")))
			ts.open()
			t.Cleanup(func() { ts.Close() })
			if _, ok := ts.salvaged(); ok {
				t.Error("a healthy index was salvaged")
			}
			if got, err := ts.FindCheckpoint("before"); err != nil || got.Seq != cp.Seq {
				t.Fatalf("checkpoint after room was made: %+v, %v", got, err)
			}
			if h, err := ts.History(name); err != nil || len(h) != 1 {
				t.Fatalf("history after room was made: %+v, %v", h, err)
			}
		})
	}
}

// punchFreePages gives back to the filesystem the blocks of the closed
// index's free pages and of what lies past its last page, so that on a full
// disk the next commit, which writes there, has no room.
func punchFreePages(t *testing.T, path string) {
	t.Helper()
	r, f := rawOf(t, path)
	ps := int64(r.meta.pageSize)
	punch := func(off, n int64) {
		must(t, syscall.Fallocate(int(f.Fd()), 0x01|0x02, off, n)) // KEEP_SIZE|PUNCH_HOLE
	}
	buf, err := r.page(r.meta.freelist)
	must(t, err)
	le := binary.LittleEndian
	idx, count := uint64(0), uint64(le.Uint16(buf[10:]))
	if count == 0xFFFF {
		idx, count = 1, le.Uint64(buf[pageHeaderSize:])
	}
	for i := idx; i < idx+count; i++ {
		punch(int64(le.Uint64(buf[pageHeaderSize+8*i:]))*ps, ps)
	}
	if end := int64(r.meta.pgid) * ps; end < r.size {
		punch(end, r.size-end)
	}
	must(t, f.Close())
}

// A damaged index whose salvage cannot be written (the state disk is full)
// stays where it is: the open fails, and once there is room the next one
// salvages it. (It used to be moved aside first, and the next start found
// no index and created an empty one.)
func TestFullStateDiskKeepsDamagedIndex(t *testing.T) {
	state := mountTmpfs(t, "1m")
	ts := &testStore{t: t, dir: t.TempDir(), index: filepath.Join(state, "index.db")}
	ts.open()
	fillIndex(ts, 80)
	cp, err := ts.Checkpoint(context.Background(), "before", nil)
	must(t, err)
	ts.crash()
	r, f := rawOf(t, ts.index)
	root := bucketRoot(t, r, bucketHistory)
	_, err = f.WriteAt(make([]byte, r.meta.pageSize), int64(root)*int64(r.meta.pageSize))
	must(t, err)
	must(t, f.Close())
	fill(t, state)

	if s, err := Open(ts.dir, ts.index, Options{}); err == nil {
		s.Close()
		t.Fatal("salvage on a full state disk: no error")
	}
	if aside, _ := filepath.Glob(ts.index + ".*"); len(aside) != 0 {
		t.Errorf("a salvage that failed left %v", aside)
	}
	if _, err := os.Stat(ts.index); err != nil {
		t.Fatalf("index after the failed salvage: %v", err)
	}

	must(t, os.Remove(filepath.Join(state, "filler")))
	ts.open()
	t.Cleanup(func() { ts.Close() })
	if _, ok := ts.salvaged(); !ok {
		t.Error("the damaged index was not salvaged once there was room")
	}
	if got, err := ts.FindCheckpoint("before"); err != nil || got.Seq != cp.Seq {
		t.Fatalf("checkpoint after the salvage: %+v, %v", got, err)
	}
}
