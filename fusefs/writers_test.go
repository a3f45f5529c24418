package fusefs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// The writers follow their files through renames, unlinks and replacement;
// the last handle's end says what is owed, and where.
func TestWritersFollowTheirFiles(t *testing.T) {
	ws := newWriters(new(versionstore.Locks))
	a, b, c := &node{}, &node{}, &node{}
	sh, vim := versionstore.Writer{Kind: versionstore.WriterMount, Pid: 7, Comm: "sh"}, versionstore.Writer{Kind: versionstore.WriterMount, Pid: 8, Comm: "vim"}
	ws.begin(a, "d/a", false, sh)
	ws.begin(a, "d/a", false, vim) // a second handle
	ws.begin(b, "x", true, sh)
	ws.begin(c, "e/c", false, sh)
	if !ws.Writing("d/a") || !ws.Writing("x") || ws.Count() != 3 {
		t.Fatalf("after begin: d/a %v, x %v, count %d", ws.Writing("d/a"), ws.Writing("x"), ws.Count())
	}
	ws.moved("d", "e", false) // d renamed over e: d/a is e/a now, e/c is replaced
	if ws.Writing("d/a") || !ws.Writing("e/a") {
		t.Fatal("d/a did not move to e/a")
	}
	if by, ok := ws.WrittenBy("e/a"); !ok || by != vim {
		t.Fatalf("e/a written by %+v (%v), want the latest opener, vim", by, ok)
	}
	if k, _ := ws.keyOf(c); k != "" || ws.Writing("e/c") {
		t.Fatalf("e/c, replaced by the rename, still has the path %q", k)
	}
	ws.moved("x", "y", true) // an exchange: y's file (none) and x's swap
	if !ws.Writing("y") || ws.Writing("x") {
		t.Fatal("the exchange did not move x to y")
	}
	ws.unlinked("y")
	if ws.Writing("y") {
		t.Fatal("an unlinked file is still being written at its path")
	}
	if key, owed, last := ws.end(a); last || owed || key != "e/a" {
		t.Fatalf("first end of a: %q %v %v", key, owed, last)
	}
	ws.owe(a)
	if key, owed := ws.paid(a, false); !owed || key != "e/a" {
		t.Fatalf("paid: %q %v", key, owed)
	}
	if key, owed, last := ws.end(a); !last || owed || key != "e/a" {
		t.Fatalf("last end of a: %q %v %v (the flush paid it)", key, owed, last)
	}
	if key, owed, last := ws.end(b); !last || !owed || key != "" {
		t.Fatalf("end of b: %q %v %v: owed, but its file left the tree", key, owed, last)
	}
	ws.end(c)
	if ws.Count() != 0 || len(ws.paths) != 0 {
		t.Fatalf("%d files, %d paths left", ws.Count(), len(ws.paths))
	}
}

// Preserve does not look at the dirty mark: when a file that a process is
// writing through the mount is removed (or renamed, truncated by name,
// created over with O_CREAT) through the mount, the bytes that process has
// written so far are recorded, and journaled, as an "external" change —
// a write behind dshfs's back — though they came through the mount.
// noteVersion, commitChange and recordSnapshot all defer to the mount's
// commit while the file is dirty; Preserve attributes the mount's own
// bytes to nobody.
func TestPreserveOfAFileBeingWrittenIsNotExternal(t *testing.T) {
	for _, op := range []string{"unlink", "rename"} {
		t.Run(op, func(t *testing.T) {
			m := mountT(t)
			m.putBacking("f", "one\n")
			m.seeFile("f")
			f, err := os.OpenFile(filepath.Join(m.mnt, "f"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("two\n"); err != nil { // no flush: still dirty
				t.Fatal(err)
			}
			switch op {
			case "unlink":
				err = os.Remove(filepath.Join(m.mnt, "f"))
			case "rename":
				err = os.Rename(filepath.Join(m.mnt, "f"), filepath.Join(m.mnt, "g"))
			}
			if err != nil {
				t.Fatal(err)
			}
			h, err := m.store.History("f")
			if err != nil {
				t.Fatal(err)
			}
			partial := versionstore.SumString("one\ntwo\n")
			for _, e := range h {
				if e.Version == partial && e.Writer.Kind == versionstore.WriterExternal {
					t.Fatalf("history of f %+v: bytes written through the mount recorded as written behind dshfs's back", h)
				}
			}
		})
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
// process's later writes land in the replaced one and are lost
// (docs/behaviour.md: "While a process holds a file open for writing …,
// tool writes and edits of it are refused").
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
	if !testfuse.WaitFor(10*time.Second, func() bool {
		ents, _ := os.ReadDir(m.backing)
		return len(ents) > 1
	}) {
		t.Fatal("the tool's temporary file never appeared")
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
		// One look under the writers' lock: two calls of Writing could
		// straddle a rename and see the mark in neither place.
		m.fs.writers.mu.Lock()
		marked := m.fs.writers.paths["d/f"] != nil || m.fs.writers.paths["e/f"] != nil
		m.fs.writers.mu.Unlock()
		f.Close()
		if st.Writing != 1 || !marked {
			t.Fatalf("round %d (opened under %s): %d marks, d/f %v, e/f %v", i, at, st.Writing, m.fs.writers.Writing("d/f"), m.fs.writers.Writing("e/f"))
		}
	}
}
