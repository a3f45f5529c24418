package remote

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/s3test"
	"github.com/dshfs/dshfs/versionstore"
)

const testBucket = "history"

// fixture is a store, a real S3 server and a bucket client on it.
type fixture struct {
	t      testing.TB
	store  *versionstore.Store
	server *s3test.Server
	loc    Location
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	srv := s3test.Start(t, testBucket)
	srv.Setenv(t)
	state := t.TempDir()
	st, err := versionstore.Open(t.TempDir(), filepath.Join(state, "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &fixture{t: t, store: st, server: srv, loc: Location{Bucket: testBucket, Prefix: "ws/" + filepath.Base(state)}}
}

// bucket is a new client, with its own counts.
func (f *fixture) bucket() *Bucket {
	f.t.Helper()
	b, err := OpenBucket(context.Background(), f.loc)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// write writes content to rel as a tool.
func (f *fixture) write(rel, content string) versionstore.Version {
	f.t.Helper()
	tg, err := f.store.Resolve(rel, rel, "write")
	if err != nil {
		f.t.Fatal(err)
	}
	r, err := f.store.WriteText(context.Background(), tg, content, versionstore.Intent{}, versionstore.ToolWriter("agent"))
	if err != nil {
		f.t.Fatal(err)
	}
	return r.Version
}

// start starts a replicator for writer, failing the test if it cannot.
func (f *fixture) start(b *Bucket, writer string) *Replicator {
	f.t.Helper()
	r, err := Start(context.Background(), f.store, b, Options{Writer: writer, Interval: 20 * time.Millisecond})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// caughtUp waits until r has shipped the whole journal.
func (f *fixture) caughtUp(r *Replicator) {
	f.t.Helper()
	want, err := f.store.JournalSeq()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := s3test.WaitFor(context.Background(), 60*time.Second, func() bool { return r.Status().ShippedSeq >= want }); err != nil {
		f.t.Fatalf("replica at %d of %d: %v (status %+v)", r.Status().ShippedSeq, want, err, r.Status())
	}
}

// fetch reads the history back with a new client.
func (f *fixture) fetch() *History {
	f.t.Helper()
	h, err := Fetch(context.Background(), f.bucket())
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}
