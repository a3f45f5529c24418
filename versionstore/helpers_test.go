package versionstore

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// testStore is a Store over a fresh workspace, with its index outside it.
type testStore struct {
	*Store
	t     *testing.T
	dir   string // the workspace (backing directory)
	index string

	writingSet *writingSet // see markWriting
}

// openTestStore opens a store in t.TempDir() and, at cleanup, closes it and
// checks the bbolt file's consistency and that no lock is left held.
func openTestStore(t *testing.T, opts ...func(*Options)) *testStore {
	t.Helper()
	return openTestStoreAt(t, t.TempDir(), opts...)
}

// openTestStoreAt is openTestStore over an existing workspace directory.
func openTestStoreAt(t *testing.T, dir string, opts ...func(*Options)) *testStore {
	t.Helper()
	ts := &testStore{t: t, dir: dir, index: filepath.Join(t.TempDir(), "state", "index.db")}
	ts.open(opts...)
	t.Cleanup(func() {
		if n := ts.locks.Len(); n != 0 {
			t.Errorf("%d per-file locks still held", n)
		}
		ts.Close()
		checkIndexFile(t, ts.index)
	})
	return ts
}

func (ts *testStore) open(opts ...func(*Options)) {
	ts.t.Helper()
	var o Options
	for _, f := range opts {
		f(&o)
	}
	s, err := Open(ts.dir, ts.index, o)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.Store = s
}

// reopen closes the store and opens it again on the same files.
func (ts *testStore) reopen() {
	ts.t.Helper()
	if err := ts.Close(); err != nil {
		ts.t.Fatal(err)
	}
	ts.open()
}

func checkIndexFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Errorf("reopen index for check: %v", err)
		return
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("index check: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("check index: %v", err)
	}
}

func (ts *testStore) path(rel string) string { return filepath.Join(ts.dir, filepath.FromSlash(rel)) }

func (ts *testStore) put(rel, content string) {
	ts.t.Helper()
	p := ts.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		ts.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		ts.t.Fatal(err)
	}
}

func (ts *testStore) get(rel string) string {
	ts.t.Helper()
	b, err := os.ReadFile(ts.path(rel))
	if err != nil {
		ts.t.Fatal(err)
	}
	return string(b)
}

func (ts *testStore) target(rel string) Target {
	ts.t.Helper()
	tg, err := ts.Resolve(rel, "/ws/"+rel, "read")
	if err != nil {
		ts.t.Fatalf("resolve %q: %v", rel, err)
	}
	return tg
}

// readAll reads rel through the store and returns its bytes and version.
func (ts *testStore) readAll(rel string) (string, Version, error) {
	var b strings.Builder
	v, err := ts.Read(context.Background(), ts.target(rel), func(chunk []byte, _ bool) error {
		b.Write(chunk)
		return nil
	})
	return b.String(), v, err
}

func (ts *testStore) version(rel string) Version {
	ts.t.Helper()
	_, v, err := ts.readAll(rel)
	if err != nil {
		ts.t.Fatal(err)
	}
	return v
}

// wantErr checks that err is an *Error of reason r (and its code), for
// operation op on display path, caused by each of causes.
func wantErr(t *testing.T, err error, r Reason, op, display string, causes ...error) {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v (%T), want %s (%s) %s %q", err, err, r.Code(), r, op, display)
	}
	if fe.Reason != r || fe.Code != r.Code() || fe.Op != op || fe.Path != display {
		t.Fatalf("error = %s (%s) %q %q, want %s (%s) %q %q", fe.Code, fe.Reason, fe.Op, fe.Path, r.Code(), r, op, display)
	}
	for _, c := range causes {
		if !errors.Is(err, c) {
			t.Fatalf("error %v is not caused by %v", err, c)
		}
	}
}

// mustIs fails unless err is target.
func mustIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

// Edit is a literal replacement: the tests' stand-in for the tool edit
// that toolapi runs through Update.
type Edit struct {
	Old, New   string
	ReplaceAll bool
}

// EditResult is an Update with the number of replacements it made.
type EditResult struct {
	UpdateResult
	Replacements int
}

var (
	errNoMatch   = errors.New("no match")
	errAmbiguous = errors.New("more than one match")
)

// editText runs e through s.Update.
func editText(ctx context.Context, s *Store, t Target, e Edit, expect *Version, w Writer, also ...AlsoCommit) (EditResult, error) {
	n := 0
	res, err := s.Update(ctx, t, expect, func(cur []byte) ([]byte, error) {
		n = bytes.Count(cur, []byte(e.Old))
		switch {
		case n == 0:
			return nil, errNoMatch
		case n > 1 && !e.ReplaceAll:
			return nil, errAmbiguous
		}
		return bytes.ReplaceAll(cur, []byte(e.Old), []byte(e.New)), nil
	}, w, also...)
	return EditResult{res, n}, err
}

// noTemps fails if any dshfs temp file is left in dir or below.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".dshfs-") {
			t.Errorf("temp file left behind: %s", p)
		}
		return nil
	})
}

// writingSet stands in for the mount's writers: the keys in it are being
// written through the mount.
type writingSet struct {
	mu   sync.Mutex
	keys map[string]bool
	// released and idle are the channels Released and Idle handed out,
	// closed as doneWriting lets the keys go.
	released map[string]chan struct{}
	idle     chan struct{}
	// asked counts the questions "is key being written?": a waiter that
	// polls asks again and again; waits counts the channels Released and
	// Idle handed out, one per wait.
	asked, waits int
}

func (w *writingSet) Writing(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked++
	return w.keys[key]
}

// questions is how many times Writing was asked so far, and how many
// waits Released began.
func (w *writingSet) questions() (asked, waits int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.asked, w.waits
}

func (w *writingSet) Count() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.keys) }
func (w *writingSet) Owed() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.keys))
}

func (w *writingSet) Released(key string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.keys[key] {
		return nil
	}
	w.waits++
	if w.released[key] == nil {
		w.released[key] = make(chan struct{})
	}
	return w.released[key]
}

func (w *writingSet) Idle() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.keys) == 0 {
		return nil
	}
	w.waits++
	if w.idle == nil {
		w.idle = make(chan struct{})
	}
	return w.idle
}

// markWriting says key is being written through the mount, as the mount
// does from a writer's open to its last release.
func (ts *testStore) markWriting(key string) {
	if ts.writingSet == nil {
		ts.writingSet = &writingSet{keys: map[string]bool{}, released: map[string]chan struct{}{}}
		ts.AttachMount(ts.writingSet)
	}
	ts.writingSet.mu.Lock()
	ts.writingSet.keys[key] = true
	ts.writingSet.mu.Unlock()
}

// doneWriting says key's writers have let go.
func (ts *testStore) doneWriting(key string) {
	ts.writingSet.mu.Lock()
	w := ts.writingSet
	delete(w.keys, key)
	if ch := w.released[key]; ch != nil {
		close(ch)
		delete(w.released, key)
	}
	if len(w.keys) == 0 && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
	w.mu.Unlock()
}

// testClock is an Options.Now that runs with the wall clock, offset by
// what advance added: a test ages what the store recorded without sleeping.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}
