package remote

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/s3test"
	"github.com/dshfs/dshfs/versionstore"
)

// TestScrubSendsDamagedAgain flips a byte of one pack and deletes another
// on the server's disk: a replicator started with Scrub finds both,
// sends their objects again from the store, and every object then reads
// back whole.
func TestScrubSendsDamagedAgain(t *testing.T) {
	f := newFixture(t)
	r := f.start(f.bucket(), "w1")
	a := f.write("a.txt", strings.Repeat("first shipment\n", 100))
	f.caughtUp(r)
	b := f.write("b.txt", strings.Repeat("second shipment\n", 100))
	f.caughtUp(r)
	if err := r.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(f.server.Dir, testBucket, f.loc.Prefix, "packs", "*"))
	if len(packs) != 2 {
		t.Fatalf("packs on the server: %v", packs)
	}
	flipByte(t, packs[0])
	if err := os.Remove(packs[1]); err != nil {
		t.Fatal(err)
	}
	if _, damaged, _ := f.fetch().Objects(context.Background()); len(damaged) != 2 {
		t.Fatalf("before the scrub: damaged %v, want both objects", damaged)
	}
	again, err := Start(context.Background(), f.store, f.bucket(), Options{Writer: "w1", Interval: 20 * time.Millisecond, Scrub: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st := again.Status(); len(st.Damaged) != 0 || st.Error != "" {
		t.Fatalf("status after the scrub: %+v", st)
	}
	h := f.fetch()
	objs, damaged, err := h.Objects(context.Background())
	if err != nil || len(damaged) != 0 {
		t.Fatalf("after the scrub: %v, damaged %v", err, damaged)
	}
	for _, v := range []versionstore.Version{a, b} {
		local, _ := f.store.Object(v)
		if !bytes.Equal(objs[v], local) {
			t.Fatalf("%s: not whole in the bucket after the scrub", v.Short())
		}
	}
}

func flipByte(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-3] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWorkspaceFromTheBucket replicates a workspace with directories (an
// empty one, one without write permission), a symlink, modes and files
// renamed and deleted, then builds it again in an empty directory from the
// bucket alone: the same tree, byte for byte.
func TestWorkspaceFromTheBucket(t *testing.T) {
	f := newFixture(t)
	root := f.store.Root()
	f.write("src/main.go", "package main\n")
	f.write("run.sh", "#!/bin/sh\necho hi\n")
	f.write("old.txt", "renamed\n")
	f.write("gone.txt", "deleted\n")
	must(t, os.Chmod(filepath.Join(root, "run.sh"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "empty/deeper"), 0o750))
	must(t, os.Symlink("src/main.go", filepath.Join(root, "link")))
	r := f.start(f.bucket(), "w1")
	f.caughtUp(r)
	// After the first tree: changes the journal carries.
	must(t, os.Rename(filepath.Join(root, "old.txt"), filepath.Join(root, "src/new.txt")))
	must(t, os.Remove(filepath.Join(root, "gone.txt")))
	if _, err := f.store.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	f.write("src/main.go", "package main // edited\n")
	must(t, os.Mkdir(filepath.Join(root, "ro"), 0o755))
	f.write("ro/keep.txt", "read only dir\n")
	must(t, os.Chmod(filepath.Join(root, "ro"), 0o555))
	t.Cleanup(func() { os.Chmod(filepath.Join(root, "ro"), 0o755) })
	if err := r.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	want, _, err := f.store.Tree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h := f.fetch()
	ws, err := h.Workspace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	objs, damaged, err := h.Objects(context.Background())
	if err != nil || len(damaged) > 0 {
		t.Fatalf("objects: %v %v", err, damaged)
	}
	dst, err := versionstore.Open(t.TempDir(), filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	t.Cleanup(func() { os.Chmod(filepath.Join(dst.Root(), "ro"), 0o755) })
	missing, err := dst.Populate(ws, func(v versionstore.Version) ([]byte, error) {
		if b, ok := objs[v]; ok {
			return b, nil
		}
		return nil, fmt.Errorf("%s: %w", v.Short(), versionstore.ErrNotKept)
	})
	if err != nil || len(missing) > 0 {
		t.Fatalf("populate: %v, missing %v", err, missing)
	}
	got, _, err := dst.Tree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range want { // the new store has not read its files yet
		want[i].Version = versionstore.Version{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt workspace:\n%+v\nwant:\n%+v", got, want)
	}
	for _, e := range got {
		if e.Type == versionstore.TreeFile {
			a, _ := os.ReadFile(filepath.Join(root, e.Path))
			b, _ := os.ReadFile(filepath.Join(dst.Root(), e.Path))
			if !bytes.Equal(a, b) {
				t.Fatalf("%s: bytes differ", e.Path)
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPopulateStaysInside: a description whose symlink would lead a later
// entry out of the workspace makes nothing outside it.
func TestPopulateStaysInside(t *testing.T) {
	outside := t.TempDir()
	dst, err := versionstore.Open(t.TempDir(), filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	v := versionstore.Sum([]byte("x"))
	entries := []versionstore.TreeEntry{
		{Path: "a", Type: versionstore.TreeSymlink, Target: outside},
		{Path: "a/b", Type: versionstore.TreeSymlink, Target: "x"},
		{Path: "a/f", Type: versionstore.TreeFile, Version: v},
		{Path: "../up", Type: versionstore.TreeFile, Version: v},
	}
	for _, e := range entries {
		dst.Populate([]versionstore.TreeEntry{entries[0], e}, func(versionstore.Version) ([]byte, error) { return []byte("x"), nil })
		os.RemoveAll(dst.Root())
		must(t, os.Mkdir(dst.Root(), 0o755))
	}
	if names, _ := os.ReadDir(outside); len(names) > 0 {
		t.Fatalf("populate made %v outside the workspace", names)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(dst.Root()), "up")); err == nil {
		t.Fatal("populate made ../up")
	}
}

// TestScrubReportsWhatItCannotSend: a damaged object whose bytes the store
// no longer keeps is named in the status, not sent.
func TestScrubReportsWhatItCannotSend(t *testing.T) {
	f := newFixture(t)
	v := f.write("a.txt", strings.Repeat("kept only there\n", 100))
	r := f.start(f.bucket(), "w1")
	f.caughtUp(r)
	must(t, r.Close(30*time.Second))
	packs, _ := filepath.Glob(filepath.Join(f.server.Dir, testBucket, f.loc.Prefix, "packs", "*"))
	if len(packs) != 1 {
		t.Fatalf("packs on the server: %v", packs)
	}
	flipByte(t, packs[0])
	// The same journal, none of the bytes.
	bare, err := versionstore.Open(t.TempDir(), filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	must(t, err)
	defer bare.Close()
	entries, _ := f.store.JournalAfter(0, 0)
	must(t, bare.ImportHistory(entries, nil, nil))
	again, err := Start(context.Background(), bare, f.bucket(), Options{Writer: "w1", Interval: 20 * time.Millisecond, Scrub: true})
	must(t, err)
	must(t, again.Close(30*time.Second))
	st := again.Status()
	if len(st.Damaged) != 1 || !strings.Contains(st.Damaged[0], v.Short()) || !strings.Contains(st.Damaged[0], "packs/") {
		t.Fatalf("status after the scrub: %+v, want %s named", st, v.Short())
	}
}

// TestTreeAgainOnceIndexed: files that were there before dshfs looked are
// in the first tree without a version; once the workspace is indexed the
// next tree names their versions, and their bytes are in the bucket,
// though the journal did not grow.
func TestTreeAgainOnceIndexed(t *testing.T) {
	f := newFixture(t)
	must(t, os.WriteFile(filepath.Join(f.store.Root(), "before.txt"), []byte("there before dshfs\n"), 0o644))
	r, err := Start(context.Background(), f.store, f.bucket(), Options{Writer: "w1", Interval: 20 * time.Millisecond, TreeInterval: 50 * time.Millisecond})
	must(t, err)
	defer r.Close(30 * time.Second)
	first := s3test.WaitFor(context.Background(), 30*time.Second, func() bool { return r.Status().Segments >= 1 })
	must(t, first)
	if _, err := f.store.Sync(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	v := versionstore.Sum([]byte("there before dshfs\n"))
	err = s3test.WaitFor(context.Background(), 30*time.Second, func() bool {
		h, err := Fetch(context.Background(), f.bucket())
		return err == nil && h.Has(v)
	})
	if err != nil {
		t.Fatalf("the bytes of a file indexed after the first tree never reached the bucket: %v", err)
	}
	ws, err := f.fetch().Workspace(context.Background())
	must(t, err)
	if len(ws) != 1 || ws[0].Version != v {
		t.Fatalf("workspace from the bucket: %+v", ws)
	}
}
