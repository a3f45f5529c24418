// Regression tests: each comment says what used to go wrong.

package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

var rewinder = versionstore.Writer{Kind: versionstore.WriterRestore, Actor: "me"}

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
	if _, err := m.store.ReadText(context.Background(), tg, func(string) {}); err != nil {
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
	m := mountT(t, func(o *Options) { o.CacheTimeout = 50 * time.Millisecond })
	if err := syscall.Mkfifo(filepath.Join(m.mnt, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // past the watcher's own-change window
	if err := os.Remove(filepath.Join(m.backing, "p")); err != nil {
		t.Fatal(err)
	}
	m.putBacking("p", "precious\n")
	deadline := time.Now().Add(3 * time.Second)
	for {
		if fi, err := os.Stat(filepath.Join(m.mnt, "p")); err == nil && fi.Mode().IsRegular() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the mount still shows the FIFO")
		}
		time.Sleep(20 * time.Millisecond)
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

	if !m.store.HasObject(versionstore.SumString("precious\n")) {
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

// A file open for writing has its dirty mark under the path it had at the
// first write. Renaming its directory through the mount moves the index
// entries but not the mark, and the commit at close clears the mark of the
// new path: the old path stays "being written through the mount" for good.
// A rewind then can never recreate the file there, and tool writes of the
// old path are refused as stale for the life of the daemon.
func TestDirRenameMovesWritersDirtyMark(t *testing.T) {
	m := mountT(t)
	m.putBacking("d/f", "one\n")
	m.seeFile("d/f")
	if _, err := m.store.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(m.mnt, "d/f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("two\n")
	if err := os.Rename(filepath.Join(m.mnt, "d"), filepath.Join(m.mnt, "e")); err != nil {
		t.Fatal(err)
	}
	f.WriteString("three\n")
	f.Close()

	if n := m.waitUnmarked(); n != 0 {
		t.Errorf("%d files still marked dirty after every writer closed", n)
	}
	res, err := m.store.Rewind(context.Background(), "cp", versionstore.RewindOptions{Writer: rewinder})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.getBacking("d/f"); got != "one\n" || res.Conflicts != 0 {
		t.Fatalf("rewind %+v: d/f = %q, want \"one\\n\" and no conflict", res, got)
	}
}

// Renaming a file that a process holds open for writing commits both paths
// and clears the dirty mark, while the process keeps writing. A tool write
// to the new name is then not refused: it publishes a new inode, and the
// process's later writes land in the replaced one and are lost (README:
// "While a process holds a file open for writing, tool writes and edits of
// it are refused as stale").
func TestRenameKeepsOpenWriterDirty(t *testing.T) {
	m := mountT(t)
	m.putBacking("app.log", "start\n")
	f, err := os.OpenFile(filepath.Join(m.mnt, "app.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("1\n")
	if err := os.Rename(filepath.Join(m.mnt, "app.log"), filepath.Join(m.mnt, "app.log.1")); err != nil {
		t.Fatal(err)
	}
	tg, err := m.store.Resolve("app.log.1", "app.log.1", "write")
	if err != nil {
		t.Fatal(err)
	}
	_, werr := m.store.WriteText(context.Background(), tg, "tool\n", versionstore.Intent{}, versionstore.ToolWriter("agent"))
	f.WriteString("2\n")
	if werr == nil {
		got, _ := m.getBacking("app.log.1")
		t.Fatalf("a tool write replaced a file still open for writing; the writer's later bytes are lost (file = %q)", got)
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
		if a.Error != "" {
			conflict[a.Path] = true
		}
	}
	for rel, want := range map[string]string{"a": "A\n", "b/x": "X\n"} {
		if got, _ := m.getBacking(rel); got != want && !conflict[rel] {
			t.Errorf("after rewind %s = %q, want %q or a conflict (rewind %+v)", rel, got, want, res)
		}
	}
}

// A flush or fsync committed the file's version and cleared its dirty mark
// while the file stayed open for writing: a log appender that fsyncs, an
// editor that keeps the file open, or a shell whose child closes a dup of
// the descriptor. A tool write then replaced the file, and the writer's
// later bytes went to the replaced inode, lost.
func TestWriterStaysMarkedAfterFsyncAndFlush(t *testing.T) {
	m := mountT(t)
	toolWrite := func(rel string) error {
		tg, err := m.store.Resolve(rel, rel, "write")
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.store.WriteText(context.Background(), tg, "tool\n", versionstore.Intent{}, versionstore.ToolWriter("agent"))
		return err
	}
	for _, how := range []string{"fsync", "a dup closed"} {
		f, err := os.OpenFile(filepath.Join(m.mnt, "log.txt"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("line1\n")
		if how == "fsync" {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		} else {
			dup, err := unix.Dup(int(f.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(dup) // a FLUSH; the file stays open
		}
		// In passthrough mode a close sends no FLUSH: only the fsync
		// commits while the file stays open.
		if h, _ := m.store.History("log.txt"); (how == "fsync" || !m.fs.Passthrough()) &&
			(len(h) == 0 || h[0].Version != versionstore.SumString("line1\n")) {
			f.Close()
			t.Fatalf("after %s: history %+v, want line1 committed", how, h)
		}
		werr := toolWrite("log.txt")
		f.WriteString("line2\n")
		f.Close()
		if werr == nil {
			t.Fatalf("after %s: a tool write replaced a file still open for writing", how)
		}
		if n := m.waitUnmarked(); n != 0 {
			t.Fatalf("after %s: %d marks left after the writer closed", how, n)
		}
		if got, _ := m.getBacking("log.txt"); got != "line1\nline2\n" {
			t.Fatalf("after %s: file %q, want both lines", how, got)
		}
		if err := toolWrite("log.txt"); err != nil {
			t.Fatalf("after %s and close: tool write refused: %v", how, err)
		}
	}
}

// An open for writing through the mount checked, before taking the file's
// lock, that the name still meant the kernel's inode. A tool publishing the
// file in that window renamed a new inode over the name: the handle kept
// the old one, marked the file dirty, and every write went to the unlinked
// inode.
func TestOpenForWriteRacingAToolPublish(t *testing.T) {
	m := mountT(t)
	m.putBacking("f", "old\n")
	if _, err := os.Stat(filepath.Join(m.mnt, "f")); err != nil { // the kernel knows the old inode
		t.Fatal(err)
	}
	big := strings.Repeat("abcdefghij", 4<<20) // long enough a publish to open into
	tg, err := m.store.Resolve("f", "f", "write")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.store.WriteText(context.Background(), tg, big, versionstore.Intent{}, versionstore.ToolWriter("agent"))
		done <- err
	}()
	// Open once the tool's temporary file exists, that is, while it holds
	// the lock and before its rename.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, _ := os.ReadDir(m.backing)
		if len(ents) > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tool's temporary file never appeared")
		}
		time.Sleep(100 * time.Microsecond)
	}
	f, err := os.OpenFile(filepath.Join(m.mnt, "f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("SHELL"), 0)
	f.Close()
	got, _ := m.getBacking("f")
	if !strings.HasPrefix(got, "SHELL") {
		t.Fatalf("the shell's write through the mount landed nowhere (file starts %q)", got[:min(len(got), 10)])
	}
}

// A file renamed while a writer still holds it (sed -i closes its temporary
// file, whose release the kernel sends later, and renames it over the
// original) is committed at its new path by the writer's release. Once a
// flush had committed the temporary file, that release found nothing owed
// and only dropped the mark: the original's new version went unrecorded, and
// a rewind skipped it.
func TestRenameBeforeReleaseIsCommitted(t *testing.T) {
	m := mountT(t)
	m.putBacking("b.txt", "old\n")
	m.seeFile("b.txt")
	f, err := os.OpenFile(filepath.Join(m.mnt, "sedtmp"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new\n")
	held, err := unix.Dup(int(f.Fd())) // the release waits for this one
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // FLUSH: the temporary file's version
	if err := os.Rename(filepath.Join(m.mnt, "sedtmp"), filepath.Join(m.mnt, "b.txt")); err != nil {
		t.Fatal(err)
	}
	unix.Close(held) // FLUSH without writes, then RELEASE
	if n := m.waitUnmarked(); n != 0 {
		t.Fatalf("%d marks left", n)
	}
	h, err := m.store.History("b.txt")
	if err != nil || len(h) == 0 || h[0].Version != versionstore.SumString("new\n") {
		t.Fatalf("b.txt history %+v %v: the renamed file's version was not recorded", h, err)
	}
}

// sed -i's pattern at speed: write a temporary file, close it, rename it
// over the target. The writer's release could run while go-fuse had not yet
// moved the node after the rename (it does so after Rename returns): it
// committed the temporary file's old path, and the target stayed marked
// "being written", its version unrecorded, until the stale-mark sweep.
func TestRapidWriteAndRenameOverLeavesNoMark(t *testing.T) {
	m := mountT(t)
	last := ""
	for i := range 300 {
		last = strings.Repeat(string(rune('a'+i%26)), 1+i%7) + "\n"
		if err := os.WriteFile(filepath.Join(m.mnt, "sedtmp"), []byte(last), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(m.mnt, "sedtmp"), filepath.Join(m.mnt, "b.txt")); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.waitUnmarked(); n != 0 {
		t.Fatalf("%d marks left 2 s after the last writer closed", n)
	}
	h, err := m.store.History("b.txt")
	if err != nil || len(h) == 0 || h[0].Version != versionstore.SumString(last) || h[0].Writer.Kind != versionstore.WriterMount {
		t.Fatalf("b.txt's newest version %+v %v, want the last bytes written through the mount", h, err)
	}
}

// A flush of a file that was just unlinked put its mark back on the path it
// had left: a file created there later was refused to tools as "being
// written" until the stale-mark sweep.
func TestFlushAfterUnlinkLeavesNoMark(t *testing.T) {
	m := mountT(t)
	for i := range 50 {
		f, err := os.OpenFile(filepath.Join(m.mnt, "u"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for j := 0; j < 20; j++ {
				f.WriteString("x\n")
				if dup, err := unix.Dup(int(f.Fd())); err == nil {
					unix.Close(dup) // a FLUSH
				}
			}
		}()
		os.Remove(filepath.Join(m.mnt, "u"))
		<-done
		f.Close()
		if n := m.waitUnmarked(); n != 0 {
			t.Fatalf("round %d: %d marks left after the writer of an unlinked file closed", i, n)
		}
	}
}

// An open for writing racing a rename of its directory marked the file
// under its old path, after the rename had moved the marks: a tool write to
// the file's new path was then allowed, and replaced the file under the
// writer, whose later bytes were lost.
func TestOpenForWriteRacingADirectoryRename(t *testing.T) {
	m := mountT(t)
	m.putBacking("d/f", "x\n")
	stop := make(chan struct{})
	renamed := make(chan struct{})
	go func() {
		defer close(renamed)
		a, b := filepath.Join(m.mnt, "d"), filepath.Join(m.mnt, "e")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if os.Rename(a, b) == nil {
				a, b = b, a
			}
		}
	}()
	defer func() {
		close(stop)
		<-renamed
	}()
	for i := range 200 {
		var f *os.File
		var at string
		for _, dir := range []string{"d", "e"} {
			var err error
			if f, err = os.OpenFile(filepath.Join(m.mnt, dir, "f"), os.O_WRONLY, 0); err == nil {
				at = dir
				break
			}
		}
		if f == nil {
			continue
		}
		// Wherever the file is now, it is marked there.
		st, err := m.store.Stats()
		if err != nil {
			t.Fatal(err)
		}
		marked := m.fs.writers.Writing("d/f") || m.fs.writers.Writing("e/f")
		f.Close()
		if st.Dirty != 1 || !marked {
			t.Fatalf("round %d (opened under %s): %d marks, d/f %v, e/f %v", i, at, st.Dirty, m.fs.writers.Writing("d/f"), m.fs.writers.Writing("e/f"))
		}
	}
}
