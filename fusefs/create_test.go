// Create through the mount: an existing file's bytes and versions are
// kept when a create truncates it.

package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// O_CREAT|O_TRUNC on an existing file keeps its bytes first and records one
// empty version by the caller (not an "external" one), also when the file
// is opened read-only.
func TestCreateTruncKeepsBytesAndAttribution(t *testing.T) {
	m := mountT(t)
	m.putBacking("f", "precious\n")
	m.seeFile("f")
	for _, mode := range []int{os.O_WRONLY, os.O_RDONLY} {
		f, err := os.OpenFile(filepath.Join(m.mnt, "f"), mode|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got, _ := m.getBacking("f"); got != "" {
			t.Fatalf("mode %d: f = %q after O_TRUNC", mode, got)
		}
		m.putBacking("f", "precious\n")
		m.seeFile("f")
	}
	if kept, err := m.store.HasObject(versionstore.SumString("precious\n")); err != nil || !kept {
		t.Fatal("the truncated bytes were not kept")
	}
	h, err := m.store.History("f")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h {
		if e.Version == versionstore.SumString("") && e.Writer.Kind != versionstore.WriterMount {
			t.Fatalf("the truncation is recorded as %+v", e.Writer)
		}
	}
}
