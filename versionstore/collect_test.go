package versionstore

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// plantObjects stores n small objects no file names, each kept at the
// time given, as a store that has seen n versions come and go would hold
// them. It returns their versions.
func plantObjects(tb testing.TB, s *Store, n int, at time.Time) []Version {
	tb.Helper()
	vs := make([]Version, 0, n)
	for done := 0; done < n; {
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i := 0; i < 10_000 && done+i < n; i++ {
				data := fmt.Appendf(nil, "planted object %d\n", done+i)
				v := Sum(data)
				if _, err := putObject(tx, s.objects.pack(v, data, at)); err != nil {
					return err
				}
				vs = append(vs, v)
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		done = len(vs)
	}
	return vs
}

// logBuffer is a logger whose output a test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A commit that returns after Close has waited for the background
// collections starts none: it would run on a closed index.
func TestNoCollectionAfterClose(t *testing.T) {
	logs := &logBuffer{}
	ts := openTestStore(t, func(o *Options) {
		o.RetainBytes = 1
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	ts.mountWrite("f.txt", "one\n")
	ts.flushPending()
	ts.retain.wait()
	must(t, ts.Close())
	ts.objectsAdded(1 << 20) // what a late commit does once it is durable
	ts.retain.wait()
	if strings.Contains(logs.String(), "collect kept bytes") {
		t.Fatalf("a collection ran after Close:\n%s", logs)
	}
}

// A collection holds no transaction for its whole length: a tool write
// made while it reads the objects commits without waiting for it, and one
// that makes a version it is about to drop current again keeps its bytes.
func TestCollectionLetsCommitsThrough(t *testing.T) {
	clock := &testClock{}
	ts := openTestStore(t, func(o *Options) { o.RetainAge, o.Now = time.Hour, clock.now })
	ts.put("f.txt", "start\n")
	old := plantObjects(t, ts.Store, 5000, clock.now())
	clock.advance(2 * time.Hour) // every planted object is past the retention age
	revived := fmt.Sprintf("planted object %d\n", 4999)
	tg := ts.target("f.txt")
	v := ts.version("f.txt")
	wrote := false
	progress := func(done, total int) {
		if wrote || done == total {
			return
		}
		wrote = true
		ch := make(chan error, 1)
		go func() {
			_, err := ts.WriteText(context.Background(), tg, revived, Intent{Kind: IntentReplaceIfVersion, Version: v}, ToolWriter("me"))
			ch <- err
		}()
		select {
		case err := <-ch:
			must(t, err)
		case <-time.After(10 * time.Second):
			t.Error("a tool write waited for the collection's whole transaction")
		}
	}
	res, err := ts.GC(progress)
	must(t, err)
	if !wrote {
		t.Fatal("the collection reported no progress before its end")
	}
	if _, err := ts.Object(old[4999]); err != nil {
		t.Errorf("the version a write made current during the collection lost its bytes: %v", err)
	}
	if has, err := ts.HasObject(old[0]); err != nil || res.Removed != len(old)-1 || has {
		t.Errorf("collection %+v: want the %d other planted objects dropped", res, len(old)-1)
	}
}
