package versionstore

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestWriteDamagedIndexes makes the damaged indexes of testdata/damaged,
// which TestDamagedIndexesFromTestdata opens. It runs only on demand, as
//
//	DSHFS_WRITE_DAMAGED=$PWD/testdata/damaged go test -count=1 -run TestWriteDamagedIndexes ./versionstore
//
// and replaces the directory's *.db.gz files; it logs the README's table,
// to paste into testdata/damaged/README.md.
//
// The damage is made the way real faults made it. Power cuts: the crash
// workload runs on the recording file system with the index's commits
// unsynced (bbolt's NoSync, what the index did before its commits were
// durable), and the file is rebuilt as a cut at many points could leave it,
// each unsynced write torn into any of its sectors. An image is kept when
// the store's own check finds its structure damaged, one for each kind of
// finding. Scribbles: pages of a real index overwritten as a misdirected
// write would (a branch page pointing to itself, the freelist page
// overwritten).
func TestWriteDamagedIndexes(t *testing.T) {
	out := os.Getenv("DSHFS_WRITE_DAMAGED")
	if out == "" {
		t.Skip("makes testdata/damaged: set DSHFS_WRITE_DAMAGED to the directory to write")
	}
	kept := map[string]damagedImage{}
	for seed := range uint64(3) {
		for _, img := range powerCutImages(t, seed, 400) {
			if _, ok := kept[img.kind]; !ok && len(kept) < 8 {
				kept[img.kind] = img
			}
		}
	}
	for _, img := range scribbledImages(t) {
		kept[img.kind] = img
	}
	must(t, os.MkdirAll(out, 0o755))
	old, err := filepath.Glob(filepath.Join(out, "*.db.gz"))
	must(t, err)
	for _, f := range old {
		must(t, os.Remove(f))
	}
	var rows []string
	for _, img := range kept {
		rows = append(rows, writeDamaged(t, out, img))
	}
	slices.Sort(rows)
	t.Logf("README table rows:\n%s", strings.Join(rows, "\n"))
}

// damagedImage is a damaged index and how it was made.
type damagedImage struct {
	name, how string
	img       []byte
	finding   string // what the check says
	kind      string // the finding's first line, numbers left out
}

var digits = regexp.MustCompile(`[0-9]+`)

// findingOf is what the check says of img ("" if nothing).
func findingOf(t *testing.T, img []byte) string {
	path := filepath.Join(t.TempDir(), "index.db")
	must(t, os.WriteFile(path, img, 0o600))
	return indexFinding(path)
}

// powerCutImages runs the crash workload on the recorder with the index's
// commits unsynced, and returns the damaged images of cuts torn at random
// points after the file's first sync.
func powerCutImages(t *testing.T, seed uint64, cuts int) []damagedImage {
	mnt, rec := mountRecorder(t)
	dir := t.TempDir()
	s, err := Open(dir, filepath.Join(mnt, "index.db"), Options{})
	must(t, err)
	t.Cleanup(func() { s.Close() }) // before the unmount
	// Set inside a commit: every later commit follows it.
	must(t, s.db.Update(func(*bolt.Tx) error { s.db.NoSync = true; return nil }))
	crashWorkload(t, s, rec, dir, seed, 60)
	must(t, s.Close())
	rec.load(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	n := len(rec.ops)
	firstSync := slices.IndexFunc(rec.ops, func(op diskOp) bool { return op.sync })
	var imgs []damagedImage
	for range cuts {
		cut := firstSync + 1 + rng.IntN(n-firstSync)
		img := rec.image(cut, func(op diskOp) [][2]int64 { return tornSpans(rng, op) })
		finding := findingOf(t, img)
		if finding == "" {
			continue
		}
		kind, _, _ := strings.Cut(digits.ReplaceAllString(finding, "N"), "; ")
		imgs = append(imgs, damagedImage{
			name:    fmt.Sprintf("powercut-s%d-c%d", seed, cut),
			how:     fmt.Sprintf("crash workload seed %d, unsynced commits, cut after %d of %d writes and syncs, torn", seed, cut, n),
			img:     img,
			finding: finding,
			kind:    kind,
		})
	}
	t.Logf("seed %d: %d operations, %d of %d cuts damaged", seed, n, len(imgs), cuts)
	return imgs
}

// scribbledImages are a real index (80 files, stopped as a power cut would)
// with pages overwritten.
func scribbledImages(t *testing.T) []damagedImage {
	le := binary.LittleEndian
	scribbles := []struct {
		name, how string
		fn        func(r *rawIndex, f *os.File)
	}{
		{"branch-cycle", "80 files; the history's root branch page's first child made the page itself", func(r *rawIndex, f *os.File) {
			id := bucketRoot(t, r, bucketHistory)
			buf, err := r.page(id)
			must(t, err)
			le.PutUint64(buf[pageHeaderSize+8:], id)
			_, err = f.WriteAt(buf, int64(id)*int64(r.meta.pageSize))
			must(t, err)
		}},
		{"freelist-overwritten", "80 files; the freelist page overwritten with a leaf page of the files bucket", func(r *rawIndex, f *os.File) {
			leaf, err := r.page(bucketRoot(t, r, bucketFiles))
			must(t, err)
			_, elems, err := elements(leaf)
			must(t, err)
			if leaf, err = r.page(elems[0].child); err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt(leaf[:r.meta.pageSize], int64(r.meta.freelist)*int64(r.meta.pageSize))
			must(t, err)
		}},
	}
	var imgs []damagedImage
	for _, sc := range scribbles {
		ts := openTestStore(t)
		fillIndex(ts, 80)
		ts.crash()
		r, f := rawOf(t, ts.index)
		sc.fn(r, f)
		must(t, f.Close())
		img, err := os.ReadFile(ts.index)
		must(t, err)
		finding := findingOf(t, img)
		if finding == "" {
			t.Fatalf("%s: the check finds nothing", sc.name)
		}
		imgs = append(imgs, damagedImage{name: sc.name, how: sc.how, img: img, finding: finding, kind: sc.name})
		ts.open() // the cleanup's check wants a sound index
	}
	return imgs
}

// writeDamaged writes img compressed into dir, opens a store on it to see
// what its salvage does, and returns its README row.
func writeDamaged(t *testing.T, dir string, img damagedImage) string {
	var z bytes.Buffer
	w, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
	must(t, err)
	w.Header.ModTime = time.Time{}
	_, err = w.Write(img.img)
	must(t, err)
	must(t, w.Close())
	file := img.name + ".db.gz"
	must(t, os.WriteFile(filepath.Join(dir, file), z.Bytes(), 0o644))
	ts := &testStore{t: t, dir: t.TempDir(), index: filepath.Join(t.TempDir(), "index.db")}
	must(t, os.WriteFile(ts.index, img.img, 0o600))
	openWithin(ts, 30*time.Second)
	defer ts.Close()
	rep, ok := ts.Salvaged()
	copied := 0
	for _, n := range rep.Copied {
		copied += n
	}
	t.Logf("%s: %d bytes, %d compressed; reported %v: %d pages lost, %v copied", file, len(img.img), z.Len(), ok, rep.Lost, rep.Copied)
	return fmt.Sprintf("| `%s` | %s | `%s` | %d | %d |", file, img.how, img.finding, rep.Lost, copied)
}
