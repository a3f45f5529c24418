package policy

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
	bolt "go.etcd.io/bbolt"
)

// Observing records, in the caller's transaction, what Observe would: the
// actor may edit the version it wrote. It records nothing where Observe
// records nothing or fails.
func TestObservingRecordsInTheCallersTransaction(t *testing.T) {
	st, err := versionstore.Open(t.TempDir(), filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := New(st.Observations(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, actor := range []string{"", "a\x00b", strings.Repeat("x", MaxActorBytes+1)} {
		if p.Observing(actor, "f") != nil {
			t.Errorf("Observing(%q) records something", actor)
		}
	}
	v := versionstore.SumString("text")
	f := p.Observing("agent", "f")
	if err := st.DB().Update(func(tx *bolt.Tx) error { return f(tx, v) }); err != nil {
		t.Fatal(err)
	}
	if got, err := p.EditIntent("agent", "f"); err != nil || got != v {
		t.Fatalf("EditIntent = %s, %v; want %s", got, err, v)
	}
	if acts, _ := p.Activity(); len(acts) != 1 || acts[0].Actor != "agent" {
		t.Errorf("activity %+v, want agent stamped", acts)
	}
}
