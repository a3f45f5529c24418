package versionstore

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The kept index (testdata/kept): an index written by an earlier dshfs,
// and what dumpIndex said of it then, item by item. A dshfs that reads its
// index differently, or changes how it is stored without upgrading it,
// finds other values. testdata/kept/README.md says how it was made.
const keptIndex = "testdata/kept/index-52f1c7d"

// TestKeptIndex opens the kept index and finds every file's record, every
// history entry, journal entry, checkpoint, object, observation and mark
// in it, with the values it had.
func TestKeptIndex(t *testing.T) {
	ts := openKeptIndex(t)
	want, err := os.ReadFile(keptIndex + ".golden")
	must(t, err)
	got := DumpIndex(ts.Store)
	compareDump(t, got, string(want))
}

// openKeptIndex opens a store on a copy of the kept index, over an empty
// workspace. The large object's file, not kept (a megabyte of noise), is
// made again from its bytes.
func openKeptIndex(t *testing.T) *testStore {
	t.Helper()
	index := filepath.Join(t.TempDir(), "state", "index.db")
	must(t, os.MkdirAll(filepath.Dir(index), 0o700))
	must(t, gunzipFile(keptIndex+".db.gz", index))
	o, err := newObjectStore(filepath.Join(filepath.Dir(index), "objects"), DefaultCaptureMaxBytes)
	must(t, err)
	big := KeptBigBytes()
	p := o.pack(Sum(big), big, time.Now())
	if p.file == nil {
		t.Fatal("the large object packs inline: it no longer tests an object file")
	}
	must(t, o.writeFile(p))
	ts := &testStore{t: t, dir: t.TempDir(), index: index}
	ts.open()
	t.Cleanup(func() {
		ts.Close()
		checkIndexFile(t, ts.index)
	})
	return ts
}

func gunzipFile(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(z)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o600)
}

// compareDump reports every line of want missing from got and every line
// of got not in want.
func compareDump(t *testing.T, got, want string) {
	t.Helper()
	gl, wl := lineSet(got), lineSet(want)
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
		if gl[l] == 0 {
			t.Errorf("missing: %s", l)
			n++
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		if wl[l] == 0 {
			t.Errorf("not in the kept dump: %s", l)
			n++
		}
	}
	if n == 0 && len(gl) != len(wl) {
		t.Errorf("%d distinct lines, the kept dump has %d", len(gl), len(wl))
	}
}

func lineSet(s string) map[string]int {
	m := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		m[l]++
	}
	return m
}

// KeptBigBytes is the content of the kept index's large file: noise that
// zstd cannot pack under inlineLimit, so its object is a file.
func KeptBigBytes() []byte {
	r := rand.New(rand.NewChaCha8([32]byte{'d', 's', 'h', 'f', 's'}))
	b := make([]byte, inlineLimit+inlineLimit/8)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// DumpIndex describes, one line per item, everything s's index holds, as
// the store reads it: files, history, journal, checkpoints, objects (their
// bytes loaded and verified), unkept reasons, unsettled publishes,
// observations, activity stamps, marks; any other bucket raw.
func DumpIndex(s *Store) string {
	s.flushPending()
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return dumpBucket(s, tx, string(name), b, add)
		})
	})
	if err != nil {
		add("error %v", err)
	}
	return strings.Join(out, "\n") + "\n"
}

func dumpBucket(s *Store, tx *bolt.Tx, name string, b *bolt.Bucket, add func(string, ...any)) error {
	switch name {
	case "files":
		return b.ForEach(func(k, _ []byte) error { return dumpFile(tx, string(k), add) })
	case "history":
		return b.ForEach(func(k, v []byte) error {
			add("history-key %x", k)
			return nil
		})
	case "journal":
		add("journal sequence=%d", b.Sequence())
		return b.ForEach(func(k, v []byte) error {
			e, err := decodeJournal(v)
			add("journal %d %s", binary.BigEndian.Uint64(k), journalLine(e))
			return err
		})
	case "checkpoints":
		cps, err := checkpoints(tx)
		for _, cp := range cps {
			add("checkpoint %q seq=%d time=%s files=%d auto=%v", cp.Name, cp.Seq, cp.Time.Format(time.RFC3339Nano), cp.Files, cp.Auto)
		}
		return err
	case "objects":
		return b.ForEach(func(k, v []byte) error {
			data, err := s.objects.load(tx, Version(k))
			add("object %s format=%c stored=%d size=%d loaded=%d err=%v", Version(k), v[0], storedAt(v).Unix(), binary.BigEndian.Uint64(v[9:]), len(data), err)
			return nil
		})
	case "unsettled":
		return b.ForEach(func(k, _ []byte) error {
			u, ok := getUnsettled(b, string(k))
			add("unsettled %q %+v %v", k, u, ok)
			return nil
		})
	}
	return dumpRaw(name, b, add)
}

// dumpFile dumps key's record and history.
func dumpFile(tx *bolt.Tx, key string, add func(string, ...any)) error {
	r, _, err := getRecord(tx, key)
	add("files %q %s fp=%+v recorded=%d hist=[%d,%d) perm=%v", key, r.Version, r.FP, r.Recorded, r.HistFirst, r.HistNext, r.Perm)
	if err != nil {
		return err
	}
	h, err := readHistory(tx, key)
	for i, e := range h {
		add("history %q #%d %s", key, r.HistNext-1-uint64(i), historyLine(e))
	}
	return err
}

// dumpRaw dumps the buckets whose values are not JSON.
func dumpRaw(name string, b *bolt.Bucket, add func(string, ...any)) error {
	return b.ForEach(func(k, v []byte) error {
		switch {
		case name == "meta" && bytes.Equal(k, keyClean):
			// The clean mark is cleared while the store is open.
		case name == "unkept":
			add("unkept %s %c", Version(k), v[0])
		case name == "observations":
			actor, key, _ := bytes.Cut(k, []byte{0})
			add("observation %q %q %x", actor, key, v)
		case name == "actors":
			add("actor %q %s", k, time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC().Format(time.RFC3339Nano))
		default:
			add("%s %q %q", name, k, v)
		}
		return nil
	})
}

func historyLine(e HistoryEntry) string {
	return fmt.Sprintf("%s size=%d time=%s writer=%s deleted=%v owner=%s", e.Version, e.Size, e.Time.Format(time.RFC3339Nano), writerLine(e.Writer), e.Deleted, ownerLine(e.Owner))
}

func journalLine(e JournalEntry) string {
	return fmt.Sprintf("seq=%d %q prev=%s unknown=%v prev_owner=%s %s size=%d time=%s writer=%s from=%q to=%q",
		e.Seq, e.Path, e.Prev, e.PrevUnknown, ownerLine(e.PrevOwner), e.Version, e.Size, e.Time.Format(time.RFC3339Nano), writerLine(e.Writer), e.From, e.To)
}

func writerLine(w Writer) string {
	return fmt.Sprintf("%s/%s/%d/%d/%s", w.Kind, w.Actor, w.Pid, w.Uid, w.Comm)
}

func ownerLine(o *Owner) string {
	if o == nil {
		return "-"
	}
	return fmt.Sprintf("%d:%d:%v", o.Uid, o.Gid, o.Perm)
}
