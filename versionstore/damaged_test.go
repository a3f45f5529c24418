package versionstore

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The damaged indexes of testdata/damaged are real ones: power cuts of the
// crash workload with the index's commits unsynced, and pages scribbled
// over (damagedgen_linux_test.go makes them; the README there lists each
// with what the check says of it and what its salvage copies). Each must
// open without panic or hang, be salvaged and reported as the README says,
// leave a sound index that works, and not be salvaged again by the next
// start.

const damagedDir = "testdata/damaged"

// damagedCase is one row of testdata/damaged/README.md.
type damagedCase struct {
	file, check  string
	lost, copied int
}

// damagedRow is a row of the README's table: | `file` | how | `check` | lost | copied |
var damagedRow = regexp.MustCompile("^\\| `([^`]+)` \\|[^|]*\\| `([^`]*)` \\| ([0-9]+) \\| ([0-9]+) \\|$")

// damagedCases reads the README's table.
func damagedCases(t *testing.T) map[string]damagedCase {
	t.Helper()
	f, err := os.Open(filepath.Join(damagedDir, "README.md"))
	must(t, err)
	defer f.Close()
	cases := map[string]damagedCase{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := damagedRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		lost, _ := strconv.Atoi(m[3])
		copied, _ := strconv.Atoi(m[4])
		cases[m[1]] = damagedCase{file: m[1], check: m[2], lost: lost, copied: copied}
	}
	must(t, sc.Err())
	return cases
}

// gunzip reads the compressed file at path.
func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	must(t, err)
	b, err := io.ReadAll(z)
	must(t, err)
	return b
}

// indexFinding is what the store's own check says of the index at path
// ("" if nothing), on one line: the page walk, then bbolt's check.
func indexFinding(path string) string {
	clean, err := examineIndex(path)
	if err == nil && !clean {
		var db *bolt.DB
		if db, err = openBolt(path, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType}); err == nil {
			err = checkIndex(db)
			db.Close()
		}
	}
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

func TestDamagedIndexesFromTestdata(t *testing.T) {
	defer debug.SetMaxStack(debug.SetMaxStack(64 << 20))
	files, err := filepath.Glob(filepath.Join(damagedDir, "*.db.gz"))
	must(t, err)
	if len(files) == 0 {
		t.Fatalf("no damaged indexes in %s (DSHFS_WRITE_DAMAGED=%s go test -run TestWriteDamagedIndexes makes them)", damagedDir, damagedDir)
	}
	cases := damagedCases(t)
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			c, ok := cases[name]
			if !ok {
				t.Fatalf("%s is not listed in %s/README.md", name, damagedDir)
			}
			openDamaged(t, c, gunzip(t, file))
		})
	}
	for name := range cases {
		if !slices.Contains(files, filepath.Join(damagedDir, name)) {
			t.Errorf("%s/README.md lists %s, which is not there", damagedDir, name)
		}
	}
}

// openDamaged opens a store on the damaged index img and checks its salvage.
func openDamaged(t *testing.T, c damagedCase, img []byte) {
	ts := &testStore{t: t, dir: t.TempDir(), index: filepath.Join(t.TempDir(), "state", "index.db")}
	must(t, os.MkdirAll(filepath.Dir(ts.index), 0o700))
	must(t, os.WriteFile(ts.index, img, 0o600))
	if got := indexFinding(ts.index); got != c.check {
		t.Errorf("the check says %q, the README %q", got, c.check)
	}
	ts.put("kept.txt", "in the workspace before the start\n")
	openWithin(ts, 30*time.Second)
	t.Cleanup(func() {
		ts.Close()
		checkIndexFile(t, ts.index)
	})
	rep, ok, err := ts.Salvaged()
	must(t, err)
	if !ok {
		t.Fatal("the damaged index was not reported as salvaged")
	}
	kept, err := os.ReadFile(rep.From)
	if err != nil || !bytes.Equal(kept, img) {
		t.Fatalf("the damaged index is not kept as it was where the report says (%s): %v", rep.From, err)
	}
	copied := 0
	for _, n := range rep.Copied {
		copied += n
	}
	if rep.Lost == 0 && copied == 0 && rep.Unreadable == "" {
		t.Error("the report says that nothing was lost and nothing copied")
	}
	if rep.Lost != c.lost || copied != c.copied {
		t.Errorf("salvage: %d pages lost, %d entries copied (%v); the README says %d and %d", rep.Lost, copied, rep.Copied, c.lost, c.copied)
	}
	must(t, ts.DB().View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("the salvaged index: %v", err)
		}
		return nil
	}))
	storeWorks(t, ts)
	must(t, ts.Close())
	ts.open()
	if again, ok, err := ts.Salvaged(); err != nil || !ok || !again.At.Equal(rep.At) {
		t.Fatalf("the clean start after the salvage: report %+v (found %v), want the first one's", again, ok)
	}
	if aside, _ := filepath.Glob(ts.index + ".damaged-*"); len(aside) != 1 {
		t.Fatalf("the clean start after the salvage salvaged again: %v", aside)
	}
	storeWorks(t, ts)
}

// storeWorks makes a tool write and reads its history back.
func storeWorks(t *testing.T, ts *testStore) {
	t.Helper()
	res, err := ts.WriteText(context.Background(), ts.target("after.txt"), "written after the salvage "+time.Now().String()+"\n", Intent{}, ToolWriter("a"))
	if err != nil {
		t.Fatalf("tool write after the salvage: %v", err)
	}
	h, err := ts.History("after.txt")
	must(t, err)
	if len(h) == 0 || h[0].Version != res.Version {
		t.Fatalf("history after the salvage: %+v, want %s first", h, res.Version.Short())
	}
	if _, err := ts.History("kept.txt"); err != nil {
		t.Fatalf("history of a file the index lost: %v", err)
	}
	if !strings.HasPrefix(ts.get("after.txt"), "written after the salvage") {
		t.Fatal("the tool write did not reach the file")
	}
}

// A power cut on a disk that lies about syncs can leave the newest commit's
// root page torn or reused while the commit before it is whole: the
// salvage copies from that one instead of losing everything.
func TestSalvageFromTheCommitBefore(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(damagedDir, "*.db.gz"))
	must(t, err)
	found := 0
	for _, file := range files {
		img := gunzip(t, file)
		r, err := openRawIndex(bytes.NewReader(img), int64(len(img)))
		if err != nil || r.rootHoldsBuckets() || !r.hasOlder || r.use(r.older) != nil || !r.rootHoldsBuckets() {
			continue
		}
		found++
		ts := &testStore{t: t, dir: t.TempDir(), index: filepath.Join(t.TempDir(), "index.db")}
		must(t, os.WriteFile(ts.index, img, 0o600))
		openWithin(ts, 30*time.Second)
		rep, _, err := ts.Salvaged()
		must(t, err)
		ts.Close()
		if len(rep.Copied) == 0 {
			t.Errorf("%s: the newest root page is lost and the commit before it whole, but the salvage copied nothing: %+v", file, rep)
		}
	}
	if found == 0 {
		t.Fatalf("no index in %s has its newest root page lost and the commit before it whole", damagedDir)
	}
}
