package versionstore

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"maps"
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
// overwritten, the meta pages zeroed).
func TestWriteDamagedIndexes(t *testing.T) {
	out := os.Getenv("DSHFS_WRITE_DAMAGED")
	if out == "" {
		t.Skip("makes testdata/damaged: set DSHFS_WRITE_DAMAGED to the directory to write")
	}
	// The first image of each kind, of the 7 most frequent kinds, and the
	// first whose newest root page is lost while the commit before it is
	// whole (the salvage copies that one).
	first, kinds := map[string]damagedImage{}, map[string]int{}
	var before *damagedImage
	for seed := range uint64(3) {
		for _, img := range powerCutImages(t, seed, 400) {
			if kinds[img.kind]++; kinds[img.kind] == 1 {
				first[img.kind] = img
			}
			if before == nil && salvagesTheCommitBefore(t, img.img) {
				img.how += "; the newest root page lost, the commit before whole"
				before = &img
			}
		}
	}
	byCount := slices.SortedFunc(maps.Keys(kinds), func(a, b string) int { return cmp.Or(kinds[b]-kinds[a], strings.Compare(a, b)) })
	var kept []damagedImage
	for i, kind := range byCount {
		t.Logf("%4d damaged images: %s", kinds[kind], kind)
		if i < 7 && (before == nil || first[kind].name != before.name) {
			kept = append(kept, first[kind])
		}
	}
	if before != nil {
		kept = append(kept, *before)
	}
	kept = append(kept, scribbledImages(t)...)
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

// kindOf is what a finding says is wrong, without the pages the walk went
// through to get there nor any number.
func kindOf(finding string) string {
	first, _, _ := strings.Cut(finding, "; ")
	first = strings.TrimPrefix(first, "index check: ")
	for {
		rest, ok := strings.CutPrefix(first, "page ")
		n, after, ok2 := strings.Cut(rest, ": ")
		if !ok || !ok2 || strings.Trim(n, "0123456789") != "" {
			break
		}
		first = after
	}
	first, _, _ = strings.Cut(first, " Stack:")
	return regexp.MustCompile(`\(hex\)[0-9a-f]+|[0-9]+`).ReplaceAllString(first, "N")
}

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
		imgs = append(imgs, damagedImage{
			name:    fmt.Sprintf("powercut-s%d-c%d", seed, cut),
			how:     fmt.Sprintf("crash workload seed %d, unsynced commits, cut after %d of %d writes and syncs, torn", seed, cut, n),
			img:     img,
			finding: finding,
			kind:    kindOf(finding),
		})
	}
	t.Logf("seed %d: %d operations, %d of %d cuts damaged", seed, n, len(imgs), cuts)
	return imgs
}

// salvagesTheCommitBefore reports whether the newest commit's root page
// of img holds no buckets while the one before it does.
func salvagesTheCommitBefore(t *testing.T, img []byte) bool {
	r, err := openRawIndex(bytes.NewReader(img), int64(len(img)))
	if err != nil || r.rootHoldsBuckets() {
		return false
	}
	return r.salvageRoot()
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
		{"meta-pages-zeroed", "80 files; both meta pages (the file's first 8 KB) zeroed", func(r *rawIndex, f *os.File) {
			_, err := f.WriteAt(make([]byte, 2*r.meta.pageSize), 0)
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
	rep, ok, err := ts.Salvaged()
	must(ts.t, err)
	copied := 0
	for _, n := range rep.Copied {
		copied += n
	}
	t.Logf("%s: %d bytes, %d compressed; reported %v: %d pages lost, %v copied", file, len(img.img), z.Len(), ok, rep.Lost, rep.Copied)
	return fmt.Sprintf("| `%s` | %s | `%s` | %d | %d |", file, img.how, img.finding, rep.Lost, copied)
}
