// Regression tests: each comment says what used to go wrong.

package versionstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// A file written straight into the backing directory after its last
// journaled change is part of what changed since the checkpoint: the rewind
// records it (keeping its bytes) before the checkpoint it makes first, then
// restores the checkpoint's bytes; undoing the rewind brings the outside
// bytes back. (It used to be journaled only by the rewind itself, after its
// own checkpoint, and the undo brought back the wrong version.)
func TestRewindRecordsOutsideChangesFirst(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f.txt", "one\n")
	ts.version("f.txt")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	ts.mountWrite("f.txt", "two\n")
	const outside = "three: written behind dshfs's back\n"
	ts.put("f.txt", outside) // not seen by dshfs yet

	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	if err != nil || res.Conflicts != 0 || ts.get("f.txt") != "one\n" {
		t.Fatalf("rewind %+v %v: f.txt = %q", res, err, ts.get("f.txt"))
	}
	undo, err := ts.Rewind(context.Background(), res.Before, RewindOptions{Writer: ToolWriter("me")})
	if err != nil {
		t.Fatal(err)
	}
	if got := ts.get("f.txt"); got != outside {
		t.Errorf("undo %+v: f.txt = %q, want %q (its bytes at checkpoint %s)", undo, got, outside, res.Before)
	}
}

// A mount batch is committed in one transaction with the objects it keeps.
// When one large object's file cannot be written (disk full, EIO, EMFILE;
// here: objects/ is not a directory) the whole batch is dropped: the
// versions and journal entries of every other file in it are lost, so a
// rewind no longer knows those files changed.
func TestObjectFileFailureKeepsTheBatch(t *testing.T) {
	ts := openTestStore(t)
	ts.put("small.txt", "one\n")
	ts.version("small.txt")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	must(t, os.RemoveAll(ts.objects.dir))
	must(t, os.WriteFile(ts.objects.dir, nil, 0o600)) // object files cannot be written

	big := make([]byte, 3<<20) // incompressible: kept as an object file
	rand.NewChaCha8([32]byte{9}).Read(big)
	ts.mount.flushing.Lock() // both changes in one batch, as under load
	ts.mountWrite("small.txt", "two\n")
	ts.mountWrite("big.bin", string(big))
	ts.mount.flushing.Unlock()
	ts.flushPending()

	h, err := ts.History("small.txt")
	must(t, err)
	if len(h) < 2 {
		t.Errorf("history of small.txt %+v: the shell's version was lost with the batch", h)
	}
	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	must(t, err)
	if got := ts.get("small.txt"); got != "one\n" {
		t.Fatalf("rewind %+v: small.txt = %q, want its bytes at the checkpoint", res, got)
	}
}

// Preserve notes a key it finds without a file as "born absent", and only a
// following Refresh clears the note. Mknod of a FIFO or socket (no Refresh),
// or an operation that fails after Preserve, leaves it behind. A regular
// file that later appears at that path is then never kept before the mount
// changes it, and the change is journaled as a creation: a rewind removes
// the file and its bytes are gone.
func TestCreatedOnlyAfterACreation(t *testing.T) {
	ts := openTestStore(t)
	// The mount's Mknod of a FIFO: lock, Preserve, mknod, no Refresh.
	unlock := ts.locks.Lock("p")
	ts.mount.Preserve("p")
	must(t, syscall.Mkfifo(ts.path("p"), 0o644))
	unlock()
	// Later the FIFO is replaced, outside the mount, by a regular file.
	must(t, os.Remove(ts.path("p")))
	ts.put("p", "precious\n")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	ts.mountWrite("p", "changed through the mount\n")

	if !ts.hasObject(SumString("precious\n")) {
		t.Error("the file's bytes were not kept before the mount changed it")
	}
	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	must(t, err)
	b, err := os.ReadFile(ts.path("p"))
	if err != nil || string(b) != "precious\n" {
		t.Fatalf("rewind %+v: p = %q, %v; want its bytes at the checkpoint", res, b, err)
	}
}

// Rewind and Restore snapshot the file they replace with keep = -1, which
// reads it whole into memory whatever its size — twice per file (the plan,
// then putBackLocked) — though bytes over the capture limit are not kept
// anyway. A rewind or restore over a multi-GiB file (a database, an image,
// a build artifact) can exhaust the daemon's memory and kill the mount.
func TestRewindDoesNotReadHugeFilesWhole(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.CaptureMaxBytes = 1 << 20 })
	ts.put("f", "small\n")
	ts.version("f")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	const huge = 128 << 20
	unlock := ts.locks.Lock("f")
	ts.mount.Preserve("f")
	must(t, os.Truncate(ts.path("f"), huge)) // sparse: cheap on disk
	if _, err := ts.mount.Refresh("f", shell); err != nil {
		t.Fatal(err)
	}
	unlock()
	ts.flushPending()

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	runtime.ReadMemStats(&after)
	must(t, err)
	// The huge file's bytes are not kept, so the rewind refuses to replace
	// it (it would lose them) — without reading it whole to find that out.
	if res.Conflicts != 1 || !errors.Is(res.Actions[0].Err, ErrWouldLose) {
		t.Fatalf("rewind %+v: want a conflict over bytes that are not kept", res)
	}
	if fi, err := os.Stat(ts.path("f")); err != nil || fi.Size() != huge {
		t.Fatalf("f changed by a refused rewind: %v %v", fi, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > huge/2 {
		t.Fatalf("rewinding one file over a %d MiB file (bytes not kept) allocated %d MiB", huge>>20, alloc>>20)
	}
}

// A checkpoint's name is printed to terminals and typed back by people:
// every control character is refused, as ErrCheckpointName says, and so
// are bytes that are not UTF-8. (Only NUL, LF, CR and the slash were; an
// ESC in a name could rewrite the screen of whoever listed checkpoints.)
func TestCheckpointNameRefusesControlCharacters(t *testing.T) {
	ts := openTestStore(t)
	for _, name := range []string{"a\x1b[2Kb", "tab\there", "nul\x00", "line\nfeed", "del\x7f", "c1\u009b", "bad\xff", "a/b", strings.Repeat("x", 201)} {
		if _, err := ts.Checkpoint(context.Background(), name, nil); !errors.Is(err, ErrCheckpointName) {
			t.Errorf("checkpoint %q: %v, want ErrCheckpointName", name, err)
		}
	}
	for _, name := range []string{"before refactor", "étape-1", "v2.0 \"rc\""} {
		if _, err := ts.Checkpoint(context.Background(), name, nil); err != nil {
			t.Errorf("checkpoint %q: %v", name, err)
		}
	}
}

// A file replaced behind dshfs's back by a symlink is no file the rewind
// may restore, and no file it may ignore: it is a conflict in the report.
// (The walk skipped it silently, and the rewind said nothing of it.)
func TestRewindReportsFileBecomeSymlink(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f.txt", "one\n")
	ts.put("other.txt", "other\n")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	must(t, os.Remove(ts.path("f.txt")))
	must(t, os.Symlink("other.txt", ts.path("f.txt")))

	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	must(t, err)
	if res.Conflicts != 1 || len(res.Actions) != 1 || res.Actions[0].Path != "f.txt" || !errors.Is(res.Actions[0].Err, ErrNotRegularNow) {
		t.Fatalf("rewind %+v: want f.txt as the one conflict (not a regular file now)", res)
	}
	if fi, err := os.Lstat(ts.path("f.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("f.txt is no longer the symlink: %v %v", fi, err)
	}
}
