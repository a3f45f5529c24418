package versionstore_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/versionstore"
)

// TestWriteKeptIndex makes testdata/kept's index and its dump, which
// TestKeptIndex reads. It runs only on demand, as
//
//	DSHFS_WRITE_KEPT=$PWD/testdata/kept go test -count=1 -run TestWriteKeptIndex ./versionstore
//
// The index is made the way a daemon makes one: tool writes and edits with
// the policy's observations in their commits, the mount's writes, a
// rename, a deletion, changes made behind the store's back, a walk, a
// collection that drops bytes, a checkpoint and changes after it. Its
// files are named after the commit of the code that wrote them; the kept
// index must be made again only when that code cannot read it any more
// (and then the old one stays too).
func TestWriteKeptIndex(t *testing.T) {
	out := os.Getenv("DSHFS_WRITE_KEPT")
	if out == "" {
		t.Skip("makes testdata/kept: set DSHFS_WRITE_KEPT to the directory to write")
	}
	name := os.Getenv("DSHFS_KEPT_NAME")
	if name == "" {
		t.Fatal("set DSHFS_KEPT_NAME to the name of the files to write (index-<commit>)")
	}
	g := newKeptGen(t)
	g.run()
	if err := g.s.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(g.index)
	if err != nil {
		t.Fatal(err)
	}
	dump := g.reopenedDump()
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	zw.Write(raw)
	zw.Close()
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, name+".db.gz"), z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, name+".golden"), []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("index %d bytes, %d gzipped", len(raw), z.Len())
}

// keptGen drives a store as the daemon would, on a clock that moves a
// minute per step.
type keptGen struct {
	t     *testing.T
	dir   string
	index string
	s     *versionstore.Store
	m     *versionstore.Mount // the mount's side of s
	pol   *policy.Policy

	mu  sync.Mutex
	now time.Time
}

func newKeptGen(t *testing.T) *keptGen {
	g := &keptGen{t: t, dir: t.TempDir(), index: filepath.Join(t.TempDir(), "state", "index.db"), now: time.Now().UTC().Truncate(time.Second)}
	clock := func() time.Time { g.mu.Lock(); defer g.mu.Unlock(); return g.now }
	g.put("README.md", "# kept\n")                        // there before the mount: a baseline
	g.put("big.bin", string(versionstore.KeptBigBytes())) // its object is a file
	s, err := versionstore.Open(g.dir, g.index, versionstore.Options{Now: clock, RetainAge: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	g.s = s
	g.m = s.AttachMount(nil)
	if g.pol, err = policy.New(s.Observations(), policy.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	return g
}

// reopenedDump is what a store opened again on the index says of it.
func (g *keptGen) reopenedDump() string {
	s, err := versionstore.Open(g.dir, g.index, versionstore.Options{})
	g.must(err)
	defer s.Close()
	return versionstore.DumpIndex(s)
}

func (g *keptGen) step() {
	g.mu.Lock()
	g.now = g.now.Add(time.Minute)
	g.mu.Unlock()
}

func (g *keptGen) put(rel, content string) {
	p := filepath.Join(g.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		g.t.Fatal(err)
	}
}

func (g *keptGen) must(err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}

func (g *keptGen) run() {
	ctx := context.Background()
	_, err := g.s.Sync(ctx, nil)
	g.must(err)
	g.step()
	g.toolWrite("claude-code-1", "notes.md", "one\n")
	g.toolEdit("claude-code-1", "notes.md", "two\n")
	g.mountWrite("notes.md", "two, saved in vim\n")
	g.toolWrite("codex-1", "src/main.go", "package main\n")
	g.step()
	g.toolRead("codex-1", "README.md")
	g.observeAbsent("codex-1", "missing.txt")
	g.mu.Lock()
	g.now = g.now.Add(time.Hour)
	g.mu.Unlock()
	_, err = g.s.GC(nil) // drops the tool's first two versions of notes.md: older than 30 minutes
	g.must(err)
	g.mountWrite("draft.txt", "draft\n")
	g.mountRename("draft.txt", "final.txt")
	g.put("README.md", "# kept, edited behind its back\n")
	_, err = g.s.Sync(ctx, nil)
	g.must(err)
	g.step()
	_, err = g.s.Checkpoint(ctx, "before-refactor", nil)
	g.must(err)
	g.toolRead("claude-code-1", "notes.md") // vim changed it since
	g.toolEdit("claude-code-1", "notes.md", "three\n")
	g.mountDelete("final.txt")
	g.toolWrite("codex-1", "src/main.go", "package main\n\nfunc main() {}\n")
}

// toolWrite writes as actor does through the write tool.
func (g *keptGen) toolWrite(actor, rel, content string) {
	g.step()
	t, err := g.s.Resolve(rel, rel, "write")
	g.must(err)
	intent, err := g.pol.WriteIntent(actor, t.Key)
	g.must(err)
	res, err := g.s.WriteText(context.Background(), t, content, intent, versionstore.ToolWriter(actor), g.pol.Observing(actor, t.Key))
	g.must(err)
	g.must(g.pol.Observe(actor, t.Key, policy.Present(res.Version)))
}

// toolEdit replaces the whole content as actor's edit tool call would.
func (g *keptGen) toolEdit(actor, rel, content string) {
	g.step()
	t, err := g.s.Resolve(rel, rel, "edit")
	g.must(err)
	v, err := g.pol.EditIntent(actor, t.Key)
	g.must(err)
	res, err := g.s.Update(context.Background(), t, &v, func([]byte) ([]byte, error) { return []byte(content), nil },
		versionstore.ToolWriter(actor), g.pol.Observing(actor, t.Key))
	g.must(err)
	g.must(g.pol.Observe(actor, t.Key, policy.Present(res.Version)))
}

func (g *keptGen) toolRead(actor, rel string) {
	g.step()
	t, err := g.s.Resolve(rel, rel, "read")
	g.must(err)
	_, v, err := g.s.ReadBytes(context.Background(), t, 1<<20)
	g.must(err)
	g.must(g.pol.Observe(actor, t.Key, policy.Present(v)))
}

func (g *keptGen) observeAbsent(actor, rel string) {
	g.must(g.pol.Observe(actor, rel, policy.Absent))
}

var vim = versionstore.Writer{Kind: versionstore.WriterMount, Pid: 4242, Uid: 1000, Comm: "vim"}

// mountWrite writes as a process writing through the mount does.
func (g *keptGen) mountWrite(rel, content string) {
	g.step()
	unlock := g.m.Locks().Lock(rel)
	defer unlock()
	if g.m.Preserve(rel) {
		g.m.Created(rel)
	}
	g.put(rel, content)
	_, err := g.m.Refresh(rel, vim)
	g.must(err)
}

func (g *keptGen) mountRename(from, to string) {
	g.step()
	unlock := g.m.Locks().Lock2(from, to)
	defer unlock()
	g.m.Preserve(from)
	g.m.Preserve(to)
	g.m.NoteRename(from, to)
	g.must(os.Rename(filepath.Join(g.dir, from), filepath.Join(g.dir, to)))
	_, err := g.m.Refresh(from, vim)
	g.must(err)
	_, err = g.m.Refresh(to, vim)
	g.must(err)
}

func (g *keptGen) mountDelete(rel string) {
	g.step()
	unlock := g.m.Locks().Lock(rel)
	defer unlock()
	g.m.Preserve(rel)
	g.must(os.Remove(filepath.Join(g.dir, rel)))
	_, err := g.m.Refresh(rel, versionstore.Writer{Kind: versionstore.WriterMount, Pid: 4300, Uid: 1000, Comm: "rm"})
	g.must(err)
}
