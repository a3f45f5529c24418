package versionstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// keptIndexWith is a copy of the kept index, changed by edit, and the
// workspace to open it over.
func keptIndexWith(t *testing.T, edit func(tx *bolt.Tx) error) (dir, index string) {
	t.Helper()
	index = filepath.Join(t.TempDir(), "state", "index.db")
	must(t, os.MkdirAll(filepath.Dir(index), 0o700))
	must(t, gunzipFile(keptIndex+".db.gz", index))
	db, err := bolt.Open(index, 0o600, nil)
	must(t, err)
	must(t, db.Update(edit))
	must(t, db.Close())
	return t.TempDir(), index
}

func setSchema(v string) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		if v == "" {
			return tx.Bucket(bucketMeta).Delete(keySchema)
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte(v))
	}
}

func readSchema(t *testing.T, index string) string {
	t.Helper()
	db, err := bolt.Open(index, 0o600, &bolt.Options{ReadOnly: true})
	must(t, err)
	defer db.Close()
	var v string
	must(t, db.View(func(tx *bolt.Tx) error { v = string(tx.Bucket(bucketMeta).Get(keySchema)); return nil }))
	return v
}

// An index a newer dshfs wrote is refused, untouched, with an error that
// says which schema it has, which this dshfs knows, and what to do.
func TestSchemaNewerRefused(t *testing.T) {
	dir, index := keptIndexWith(t, setSchema("7"))
	before, err := os.ReadFile(index)
	must(t, err)
	s, err := Open(dir, index, Options{})
	if err == nil {
		s.Close()
		t.Fatal("an index of schema 7 was opened")
	}
	if !errors.Is(err, ErrIndexNewer) {
		t.Errorf("error %v is not ErrIndexNewer", err)
	}
	for _, want := range []string{index, "schema 7", "knows schema 1", "newer dshfs", "move the state directory " + filepath.Dir(index) + " aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	after, err := os.ReadFile(index)
	must(t, err)
	if string(after) != string(before) {
		t.Error("the refused index was changed")
	}
	if m, _ := filepath.Glob(index + ".*"); len(m) != 0 {
		t.Errorf("the refused index was salvaged: %v", m)
	}
}

// An index without a schema is of the first one: opened, and marked so.
func TestSchemaMissingIsOne(t *testing.T) {
	dir, index := keptIndexWith(t, setSchema(""))
	ts := &testStore{t: t, dir: dir, index: index}
	ts.open()
	must(t, ts.Close())
	if v := readSchema(t, index); v != "1" {
		t.Fatalf("schema after open = %q, want \"1\"", v)
	}
}

// A schema that is no number is refused as it is.
func TestSchemaUnreadableRefused(t *testing.T) {
	dir, index := keptIndexWith(t, setSchema("one"))
	s, err := Open(dir, index, Options{})
	if err == nil {
		s.Close()
		t.Fatal("an index of schema \"one\" was opened")
	}
	if !strings.Contains(err.Error(), `schema "one"`) || strings.Contains(err.Error(), "make room") {
		t.Errorf("error %q", err)
	}
	if v := readSchema(t, index); v != "one" {
		t.Fatalf("schema after the refusal = %q", v)
	}
}

// withUpgrade makes this dshfs's schema 2, upgraded to from 1 by step.
func withUpgrade(t *testing.T, step func(tx *bolt.Tx) error) {
	old := upgrades
	upgrades = append(upgrades[:len(upgrades):len(upgrades)], step)
	t.Cleanup(func() { upgrades = old })
}

// An older index is upgraded once, when it is opened, and keeps every
// item it had.
func TestSchemaUpgrade(t *testing.T) {
	runs := 0
	withUpgrade(t, func(tx *bolt.Tx) error {
		runs++
		return tx.Bucket(bucketMeta).Put([]byte("upgraded"), []byte("yes"))
	})
	ts := openKeptIndex(t)
	want, err := os.ReadFile(keptIndex + ".golden")
	must(t, err)
	wantNow := strings.Replace(string(want), `meta "schema" "1"`, `meta "schema" "2"`+"\n"+`meta "upgraded" "yes"`, 1)
	compareDump(t, DumpIndex(ts.Store), wantNow)
	ts.reopen()
	if runs != 1 {
		t.Errorf("the upgrade ran %d times, want once", runs)
	}
	must(t, ts.Close())
	if v := readSchema(t, ts.index); v != "2" {
		t.Fatalf("schema after the upgrade = %q", v)
	}
}

// An upgrade that fails changes nothing: the index stays of its version,
// and the next start tries again.
func TestSchemaUpgradeFails(t *testing.T) {
	withUpgrade(t, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketJournal); err != nil {
			return err
		}
		return errors.New("no room")
	})
	dir, index := keptIndexWith(t, func(*bolt.Tx) error { return nil })
	s, err := Open(dir, index, Options{})
	if err == nil {
		s.Close()
		t.Fatal("opened although the upgrade failed")
	}
	if !strings.Contains(err.Error(), "upgrade index schema 1 to 2: no room") {
		t.Errorf("error %q", err)
	}
	if v := readSchema(t, index); v != "1" {
		t.Fatalf("schema after the failed upgrade = %q", v)
	}
	db, err := bolt.Open(index, 0o600, &bolt.Options{ReadOnly: true})
	must(t, err)
	defer db.Close()
	must(t, db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketJournal) == nil {
			t.Error("the failed upgrade's change stayed")
		}
		return nil
	}))
}

// A new index is of this dshfs's schema from the start: nothing upgrades it.
func TestSchemaNewIndex(t *testing.T) {
	withUpgrade(t, func(tx *bolt.Tx) error { return errors.New("ran on a new index") })
	ts := openTestStore(t)
	must(t, ts.Close())
	if v := readSchema(t, ts.index); v != "2" {
		t.Fatalf("schema of a new index = %q", v)
	}
}
