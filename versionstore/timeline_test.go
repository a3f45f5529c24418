package versionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var shell = Writer{Kind: WriterMount, Pid: 42, Comm: "sh"}

// mountWrite changes rel the way the mount does: under the file's lock, the
// bytes before kept first, the change made, the version committed.
func (ts *testStore) mountWrite(rel, content string) {
	ts.t.Helper()
	ts.writeBy(shell, rel, content)
}

func (ts *testStore) mountRemove(rel string) {
	ts.t.Helper()
	unlock := ts.locks.Lock(rel)
	defer unlock()
	ts.mount.Preserve(rel)
	if err := os.Remove(ts.path(rel)); err != nil {
		ts.t.Fatal(err)
	}
	if _, err := ts.mount.Refresh(rel, shell); err != nil {
		ts.t.Fatal(err)
	}
}

func (ts *testStore) mountRename(from, to string) {
	ts.t.Helper()
	unlock := ts.locks.Lock2(from, to)
	defer unlock()
	ts.mount.Preserve(from)
	absent := ts.mount.Preserve(to)
	if err := os.Rename(ts.path(from), ts.path(to)); err != nil {
		ts.t.Fatal(err)
	}
	ts.mount.NoteRename(from, to)
	if absent {
		ts.mount.Created(to)
	}
	for _, k := range []string{from, to} {
		if _, err := ts.mount.Refresh(k, shell); err != nil {
			ts.t.Fatal(err)
		}
	}
}

func (ts *testStore) toolWrite(rel, content string) Version {
	ts.t.Helper()
	res, err := ts.WriteText(context.Background(), ts.target(rel), content, Intent{}, ToolWriter("agent"))
	if err != nil {
		ts.t.Fatal(err)
	}
	return res.Version
}

func (ts *testStore) object(v Version) string {
	ts.t.Helper()
	b, err := ts.Object(v)
	if err != nil {
		ts.t.Fatalf("object %s: %v", v, err)
	}
	return string(b)
}

// A file that existed before the store saw it, overwritten by a shell and
// by a tool, keeps every version's bytes, the first one included.
func TestEveryVersionKept(t *testing.T) {
	ts := openTestStore(t)
	ts.put("a.txt", "original\n")
	orig := SumString("original\n")
	ts.mountWrite("a.txt", "by the shell\n")
	v2 := ts.toolWrite("a.txt", "by the tool\n")
	for v, want := range map[Version]string{orig: "original\n", SumString("by the shell\n"): "by the shell\n", v2: "by the tool\n"} {
		if got := ts.object(v); got != want {
			t.Errorf("object %s = %q, want %q", v, got, want)
		}
	}
	h, err := ts.History("a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || h[2].Version != orig || h[2].Writer.Kind != WriterBaseline || h[1].Writer != shell {
		t.Fatalf("history %+v", h)
	}
	for _, e := range h {
		if !e.Kept {
			t.Errorf("version %s not marked kept", e.Version)
		}
	}
}

// Rewinding to a checkpoint undoes a tool edit, a shell rewrite, a removal,
// a rename and a creation; the rewind is itself undone by rewinding to the
// checkpoint it made first.
func TestCheckpointRewind(t *testing.T) {
	ts := openTestStore(t)
	files := map[string]string{"a.txt": "alpha\n", "b.txt": "beta\n", "c.txt": "gamma\n", "d/d.txt": "delta\n", "untouched": "same\n"}
	for k, v := range files {
		ts.put(k, v)
	}
	ts.version("a.txt") // read by the agent before the checkpoint
	cp, err := ts.Checkpoint(context.Background(), "", nil)
	if err != nil || cp.Name != "cp-1" {
		t.Fatalf("checkpoint %+v %v", cp, err)
	}
	if _, err := editText(context.Background(), ts.Store, ts.target("a.txt"), Edit{Old: "alpha", New: "ALPHA"}, nil, ToolWriter("agent")); err != nil {
		t.Fatal(err)
	}
	ts.mountWrite("b.txt", "rewritten\n")
	ts.mountRemove("c.txt")
	ts.mountRename("d/d.txt", "e.txt")
	ts.mountWrite("new.txt", "created\n")

	res, err := ts.Rewind(context.Background(), "cp-1", RewindOptions{DryRun: true, Writer: ToolWriter("me")})
	if err != nil || len(res.Actions) != 6 || res.Conflicts != 0 || res.Before != "" {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if ts.get("b.txt") != "rewritten\n" {
		t.Fatal("a dry run changed a file")
	}
	res, err = ts.Rewind(context.Background(), "cp-1", RewindOptions{Writer: ToolWriter("me")})
	if err != nil || res.Conflicts != 0 || len(res.Actions) != 6 {
		t.Fatalf("rewind: %+v %v", res, err)
	}
	ops := map[string]string{}
	for _, a := range res.Actions {
		ops[a.Path] = a.Op
	}
	want := map[string]string{"a.txt": "restore", "b.txt": "restore", "c.txt": "recreate", "d/d.txt": "recreate", "e.txt": "remove", "new.txt": "remove"}
	for k, op := range want {
		if ops[k] != op {
			t.Errorf("%s: op %q, want %q", k, ops[k], op)
		}
	}
	for k, v := range files {
		if got := ts.get(k); got != v {
			t.Errorf("%s = %q after rewind, want %q", k, got, v)
		}
	}
	for _, k := range []string{"e.txt", "new.txt"} {
		if _, err := os.Lstat(ts.path(k)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after rewind", k)
		}
	}
	// Undo the rewind.
	res, err = ts.Rewind(context.Background(), res.Before, RewindOptions{Writer: ToolWriter("me")})
	if err != nil || res.Conflicts != 0 || len(res.Actions) != 6 {
		t.Fatalf("undo: %+v %v", res, err)
	}
	if ts.get("b.txt") != "rewritten\n" || ts.get("new.txt") != "created\n" || ts.get("a.txt") != "ALPHA\n" {
		t.Fatal("rewinding the rewind did not bring the changes back")
	}
	cps, err := ts.Checkpoints()
	if err != nil || len(cps) != 3 || !cps[1].Auto || cps[0].Name != "cp-1" {
		t.Fatalf("checkpoints %+v %v", cps, err)
	}
	if _, err := ts.Rewind(context.Background(), "nope", RewindOptions{Writer: ToolWriter("me")}); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("rewind to a missing checkpoint: %v", err)
	}
	if _, err := ts.Checkpoint(context.Background(), "cp-1", nil); err == nil {
		t.Fatal("a checkpoint name was reused")
	}
}

// A rewind never clobbers: a file being written through the mount is
// reported and left alone. A file dshfs had not seen before the checkpoint
// comes back: the checkpoint indexed the whole workspace and kept its
// bytes.
func TestRewindConflicts(t *testing.T) {
	ts := openTestStore(t)
	ts.put("busy.txt", "one\n")
	ts.put("unseen.txt", "one\n")
	ts.version("busy.txt")
	if _, err := ts.Checkpoint(context.Background(), "start", nil); err != nil {
		t.Fatal(err)
	}
	ts.mountWrite("busy.txt", "two\n")
	// A mount commit of a file nobody kept the bytes of: no Preserve first.
	ts.put("unseen.txt", "two\n")
	unlock := ts.locks.Lock("unseen.txt")
	ts.mount.Refresh("unseen.txt", shell)
	unlock()
	ts.locks.Lock("busy.txt")() // settle
	ts.markWriting("busy.txt")  // a writer holds it open

	res, err := ts.Rewind(context.Background(), "start", RewindOptions{Writer: ToolWriter("me")})
	if err != nil || res.Conflicts != 1 || len(res.Actions) != 2 {
		t.Fatalf("rewind: %+v %v", res, err)
	}
	for _, a := range res.Actions {
		if (a.Err == nil) != (a.Path == "unseen.txt") {
			t.Errorf("%s: error %q", a.Path, a.Error)
		}
	}
	if ts.get("busy.txt") != "two\n" {
		t.Fatal("a file being written was changed")
	}
	if ts.get("unseen.txt") != "one\n" {
		t.Fatalf("unseen.txt = %q, want its bytes at the checkpoint", ts.get("unseen.txt"))
	}
	unlockBusy := ts.locks.Lock("busy.txt")
	ts.mount.Refresh("busy.txt", shell)
	ts.doneWriting("busy.txt")
	unlockBusy()
}

// A file open for writing through the mount with changes not committed yet
// (with kernel passthrough its writes are not seen until its last writer's
// release) may differ from the checkpoint although its journal says it does
// not: a rewind reports it as a conflict rather than leave it as if it were
// at its checkpoint version. One outside the rewind's paths is not named.
func TestRewindNamesFilesWithUncommittedWrites(t *testing.T) {
	ts := openTestStore(t)
	ts.put("open.txt", "one\n")
	ts.put("other/open.txt", "one\n")
	ts.version("open.txt")
	ts.version("other/open.txt")
	if _, err := ts.Checkpoint(context.Background(), "start", nil); err != nil {
		t.Fatal(err)
	}
	ts.markWriting("open.txt")
	ts.markWriting("other/open.txt")
	defer ts.doneWriting("open.txt")
	defer ts.doneWriting("other/open.txt")
	res, err := ts.Rewind(context.Background(), "start", RewindOptions{Writer: ToolWriter("me"), Exclude: []string{"other"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Conflicts != 1 || len(res.Actions) != 1 || res.Actions[0].Path != "open.txt" || !errors.Is(res.Actions[0].Err, ErrBeingWritten) {
		t.Fatalf("rewind: %+v, want open.txt alone named as being written", res)
	}
}

// A damaged object is an error, never returned, and never written back.
func TestCorruptObjects(t *testing.T) {
	ts := openTestStore(t)
	v1 := ts.toolWrite("small.txt", "small\n")
	ts.toolWrite("small.txt", "changed\n")
	big := make([]byte, 3<<20) // incompressible: stored as a file
	rand.NewChaCha8([32]byte{1}).Read(big)
	ts.put("big.bin", string(big))
	vbig := Sum(big)
	ts.mountWrite("big.bin", "replaced\n")

	ts.flushPending()
	must(t, ts.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketObjects)
		v := bytes.Clone(b.Get(v1[:]))
		v[len(v)-1] ^= 0xff
		return b.Put(v1[:], v)
	}))
	p := ts.objects.path(vbig)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("large object not in a file: %v", err)
	}
	data[len(data)/2] ^= 1
	os.WriteFile(p, data, 0o600)

	for _, v := range []Version{v1, vbig} {
		if _, err := ts.Object(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("object %s: %v, want ErrCorrupt", v, err)
		}
	}
	for rel, v := range map[string]Version{"small.txt": v1, "big.bin": vbig} {
		before := ts.get(rel)
		if _, err := ts.Restore(context.Background(), ts.target(rel), v, ToolWriter("me")); !errors.Is(err, ErrCorrupt) {
			t.Errorf("restore %s: %v, want ErrCorrupt", rel, err)
		}
		if ts.get(rel) != before {
			t.Errorf("%s changed by a failed restore", rel)
		}
	}
}

// Restore is a guarded write recorded as a restore, and undoable.
func TestRestore(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f.txt", "first\n")
	first := SumString("first\n")
	ts.mountWrite("f.txt", "second\n")
	res, err := ts.Restore(context.Background(), ts.target("f.txt"), first, ToolWriter("me"))
	if err != nil || res.From != SumString("second\n") || res.To != first || ts.get("f.txt") != "first\n" {
		t.Fatalf("restore: %+v %v, file %q", res, err, ts.get("f.txt"))
	}
	h, _ := ts.History("f.txt")
	if h[0].Writer.Kind != WriterKind("tool") || h[0].Version != first {
		t.Fatalf("history %+v", h)
	}
	if _, err := ts.Restore(context.Background(), ts.target("f.txt"), res.From, ToolWriter("me")); err != nil || ts.get("f.txt") != "second\n" {
		t.Fatalf("undo restore: %v", err)
	}
	if _, err := ts.Restore(context.Background(), ts.target("f.txt"), SumString("never\n"), ToolWriter("me")); !errors.Is(err, ErrNotKept) {
		t.Fatalf("restore of an unknown version: %v", err)
	}
}

// Files over the capture limit keep versions, not bytes, and say so.
func TestCaptureLimit(t *testing.T) {
	ts := openTestStore(t, func(o *Options) { o.CaptureMaxBytes = 100 })
	ts.mountWrite("big.txt", strings.Repeat("x", 200))
	ts.mountWrite("small.txt", "tiny\n")
	h, _ := ts.History("big.txt")
	if len(h) != 1 || h[0].Kept || h[0].Size != 200 {
		t.Fatalf("big history %+v", h)
	}
	if _, err := ts.Object(h[0].Version); !errors.Is(err, ErrNotKept) {
		t.Fatalf("object of a big file: %v", err)
	}
	if h, _ := ts.History("small.txt"); !h[0].Kept {
		t.Fatal("small file's bytes not kept")
	}
}

// Collection keeps the current version of every file and what checkpoints
// need, and brings the store within its budget, on demand and by itself.
func TestRetention(t *testing.T) {
	const budget = 160 << 10 // the index's 60 KiB, and about 12 versions
	ts := openTestStore(t, func(o *Options) { o.RetainBytes = budget })
	rng := rand.NewChaCha8([32]byte{3})
	version := func() []byte {
		b := make([]byte, 8<<10) // incompressible
		rng.Read(b)
		return b
	}
	var pinned Version
	for i := range 30 {
		b := version()
		ts.mountWrite("f.bin", string(b))
		if i == 4 {
			pinned = Sum(b)
			if _, err := ts.Checkpoint(context.Background(), "five", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	ts.mountWrite("g.bin", string(version()))
	// Commit what is queued before waiting for the background collections:
	// else the sync loop may commit it, and start one, while we wait.
	ts.flushPending()
	ts.retain.wait()
	res, err := ts.GC(nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StoredBytes > budget {
		t.Fatalf("gc left the store over budget: %+v", res)
	}
	var stored int64
	must(t, ts.db.View(func(tx *bolt.Tx) error { stored = fileBytes(tx) + ts.pagesInUse(tx); return nil }))
	if stored > budget || stored != res.StoredBytes {
		t.Fatalf("stored %d bytes, budget %d, gc said %d", stored, budget, res.StoredBytes)
	}
	cur, _ := os.ReadFile(ts.path("f.bin"))
	for _, v := range []Version{pinned, Sum(cur)} {
		if _, err := ts.Object(v); err != nil {
			t.Errorf("pinned version %s dropped: %v", v, err)
		}
	}
	h, _ := ts.History("f.bin")
	kept := 0
	for _, e := range h {
		if e.Kept {
			kept++
		}
	}
	if kept >= len(h) || kept < 2 {
		t.Fatalf("%d of %d versions kept", kept, len(h))
	}
}

// Old bytes past the retention age go, even within the budget.
func TestRetentionAge(t *testing.T) {
	clock := &testClock{}
	ts := openTestStore(t, func(o *Options) { o.RetainAge, o.Now = time.Nanosecond, clock.now })
	ts.mountWrite("f.txt", "one\n")
	ts.mountWrite("f.txt", "two\n")
	clock.advance(2 * time.Second) // stored times are in seconds
	res, err := ts.GC(nil)
	if err != nil || res.Removed != 1 || !ts.hasObject(SumString("two\n")) || ts.hasObject(SumString("one\n")) {
		t.Fatalf("gc %+v %v", res, err)
	}
}

// A change made behind dshfs's back before a checkpoint, and first seen
// after it, belongs before it: the rewind leaves it.
func TestCheckpointSeesOutsideChangesFirst(t *testing.T) {
	ts := openTestStore(t)
	ts.put("f.txt", "one\n")
	ts.version("f.txt")
	ts.put("f.txt", "two, behind dshfs's back\n")
	if _, err := ts.Checkpoint(context.Background(), "cp", nil); err != nil {
		t.Fatal(err)
	}
	ts.mountWrite("f.txt", "three\n")
	res, err := ts.Rewind(context.Background(), "cp", RewindOptions{Writer: ToolWriter("me")})
	if err != nil || res.Conflicts != 0 {
		t.Fatalf("rewind %+v %v", res, err)
	}
	if got := ts.get("f.txt"); got != "two, behind dshfs's back\n" {
		t.Fatalf("f.txt = %q after rewind, want its bytes at the checkpoint", got)
	}
}

// A restore that recreates a deleted file gives it the permission bits the
// file last had, not the default mode: an executable comes back executable,
// also after a chmod the index learnt of only when the file was about to go.
func TestRestoreRecreatesPermissionBits(t *testing.T) {
	ts := openTestStore(t)
	for _, c := range []struct {
		name       string
		first, now os.FileMode // at the first sighting, just before removal
	}{{"run.sh", 0o755, 0o755}, {"tool", 0o644, 0o700}} {
		ts.put(c.name, "#!/bin/sh\n")
		if err := os.Chmod(ts.path(c.name), c.first); err != nil {
			t.Fatal(err)
		}
		v := ts.version(c.name) // seen: recorded with its bits
		if err := os.Chmod(ts.path(c.name), c.now); err != nil {
			t.Fatal(err)
		}
		ts.mount.Preserve(c.name) // what the mount does before removing a file
		if err := os.Remove(ts.path(c.name)); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.mount.Refresh(c.name, Writer{Kind: WriterMount}); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.Restore(context.Background(), ts.target(c.name), v, ToolWriter("me")); err != nil {
			t.Fatalf("restore %s: %v", c.name, err)
		}
		fi, err := os.Stat(ts.path(c.name))
		if err != nil || fi.Mode().Perm() != c.now {
			t.Fatalf("%s recreated with %v (%v), want %v", c.name, fi.Mode().Perm(), err, c.now)
		}
	}
	// A file whose bits the index never saw gets the default mode.
	ts.put("plain.txt", "x\n")
	v := ts.version("plain.txt")
	ts.mount.Preserve("plain.txt")
	must(t, ts.db.Update(func(tx *bolt.Tx) error { // as an index from before the bits were recorded
		r, _, err := getRecord(tx, "plain.txt")
		r.Perm = 0
		return errors.Join(err, putRecord(tx, "plain.txt", r))
	}))
	os.Remove(ts.path("plain.txt"))
	ts.mount.Refresh("plain.txt", Writer{Kind: WriterMount})
	if _, err := ts.Restore(context.Background(), ts.target("plain.txt"), v, ToolWriter("me")); err != nil {
		t.Fatalf("restore plain.txt: %v", err)
	}
	if fi, err := os.Stat(ts.path("plain.txt")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("plain.txt recreated: %v %v, want 0644", fi, err)
	}
}

// The budget counts the index's own bytes: the history and journal of many
// small versions take far more room than the versions' bytes, and a store
// whose index alone is over the budget keeps only the versions it needs.
func TestRetentionCountsTheIndex(t *testing.T) {
	const budget = 128 << 10
	ts := openTestStore(t, func(o *Options) { o.RetainBytes = budget })
	if _, err := ts.Checkpoint(context.Background(), "start", nil); err != nil {
		t.Fatal(err)
	}
	const files, versions = 200, 8
	for v := range versions {
		for f := range files {
			ts.mountWrite(fmt.Sprintf("f%d.txt", f), fmt.Sprintf("v%d\n", v))
		}
	}
	res, err := ts.GC(nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(ts.index)
	if err != nil {
		t.Fatal(err)
	}
	if res.StoredBytes <= budget {
		t.Errorf("gc says the store holds %d bytes, within the %d budget, with an index file of %d bytes", res.StoredBytes, budget, fi.Size())
	}
	for v := range versions - 1 {
		if ts.hasObject(SumString(fmt.Sprintf("v%d\n", v))) {
			t.Errorf("v%d still kept with the index over the budget (gc %+v)", v, res)
		}
	}
	if !ts.hasObject(SumString(fmt.Sprintf("v%d\n", versions-1))) {
		t.Error("the current version was dropped")
	}
}
