package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// TestReplicaHoldsTheHistory ships a session (small and large files, an
// overwrite, a checkpoint) and reads back every entry, the checkpoint and
// the bytes of every version from the bucket alone.
func TestReplicaHoldsTheHistory(t *testing.T) {
	f := newFixture(t)
	r := f.start(f.bucket(), "w1")
	f.write("a.txt", "one\n")
	f.write("dir/b.go", "package b\n")
	big := make([]byte, 3<<20) // incompressible: an object of its own
	rand.NewChaCha8([32]byte{1}).Read(big)
	f.write("big.bin", string(big))
	if _, err := f.store.Checkpoint(context.Background(), "before", nil); err != nil {
		t.Fatal(err)
	}
	f.write("a.txt", "two\n")
	if err := r.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	want, err := f.store.JournalAfter(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := f.fetch()
	if !reflect.DeepEqual(h.Entries, want) {
		t.Fatalf("entries from the bucket:\n%+v\nlocal:\n%+v", h.Entries, want)
	}
	cps, _ := f.store.Checkpoints()
	if !reflect.DeepEqual(h.Checkpoints, cps) || len(cps) != 1 {
		t.Fatalf("checkpoints from the bucket %+v, local %+v", h.Checkpoints, cps)
	}
	objs, damaged, err := h.Objects(context.Background())
	if err != nil || len(damaged) > 0 {
		t.Fatalf("objects: %v %v", err, damaged)
	}
	for _, e := range want {
		local, err := f.store.Object(e.Version)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(objs[e.Version], local) {
			t.Fatalf("%s: the bucket's bytes differ", e.Path)
		}
		one, err := h.Object(context.Background(), e.Version)
		if err != nil || !bytes.Equal(one, local) {
			t.Fatalf("%s: fetched alone: %v", e.Path, err)
		}
	}
}

// TestPutsPerThousandSmallFiles counts the requests that ship 1,000 new
// 2 KiB files: small objects go in packs, not one PUT each.
func TestPutsPerThousandSmallFiles(t *testing.T) {
	f := newFixture(t)
	for i := range 1000 {
		f.write(fmt.Sprintf("src/f%04d.txt", i), strings.Repeat(fmt.Sprintf("line %d of file %d\n", i, i), 2048/20))
	}
	b := f.bucket()
	r := f.start(b, "w1")
	f.caughtUp(r)
	if err := r.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	c := b.Counts()
	t.Logf("1,000 files of 2 KiB: %d PUTs, %d bytes sent", c.Puts, c.PutBytes)
	if c.Puts > 20 {
		t.Fatalf("%d PUTs for 1,000 small files, want at most 20", c.Puts)
	}
	if got := len(f.fetch().Entries); got != 1000 {
		t.Fatalf("%d entries in the bucket, want 1000", got)
	}
}

// TestReplicaResumesWithoutSendingAgain stops a replicator, writes more,
// and starts it again as the same writer: only what is new is sent, and
// no entry is in the bucket twice.
func TestReplicaResumesWithoutSendingAgain(t *testing.T) {
	f := newFixture(t)
	for i := range 50 {
		f.write(fmt.Sprintf("f%d", i), strings.Repeat("x", 4096)+fmt.Sprint(i))
	}
	first := f.start(f.bucket(), "w1")
	f.caughtUp(first)
	if err := first.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	f.write("f0", "changed")
	b := f.bucket()
	second := f.start(b, "w1")
	f.caughtUp(second)
	if err := second.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// One pack with the new object, the workspace's tree (described when a
	// replicator starts), one segment, one head.
	if c := b.Counts(); c.Puts != 4 || c.PutBytes > 4096 {
		t.Fatalf("resuming sent %d PUTs, %d bytes; want 4 small ones", c.Puts, c.PutBytes)
	}
	assertNoDuplicates(t, f.fetch().Entries, 51)
}

func assertNoDuplicates(t *testing.T, entries []versionstore.JournalEntry, want int) {
	t.Helper()
	seen := map[uint64]bool{}
	for _, e := range entries {
		if seen[e.Seq] {
			t.Fatalf("journal entry %d is in the bucket twice", e.Seq)
		}
		seen[e.Seq] = true
	}
	if len(entries) != want {
		t.Fatalf("%d entries in the bucket, want %d", len(entries), want)
	}
}

// TestSecondWriterRefused: another daemon on the same prefix is refused;
// with Takeover it gets the prefix, and the first stops at its next write
// instead of overwriting the head.
func TestSecondWriterRefused(t *testing.T) {
	f := newFixture(t)
	first := f.start(f.bucket(), "w1")
	f.write("a", "1")
	f.caughtUp(first)
	_, err := Start(context.Background(), f.store, f.bucket(), Options{Writer: "w2"})
	if !errors.Is(err, ErrTaken) || !strings.Contains(err.Error(), "w1") {
		t.Fatalf("second writer: %v, want ErrTaken naming w1", err)
	}
	second, err := Start(context.Background(), f.store, f.bucket(), Options{Writer: "w2", Takeover: true})
	if err != nil {
		t.Fatal(err)
	}
	f.write("b", "2")
	if err := second.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(30 * time.Second); !errors.Is(err, ErrTaken) {
		t.Fatalf("the fenced writer's drain: %v, want ErrTaken", err)
	}
	if !first.Status().Fenced {
		t.Fatalf("the fenced writer's status: %+v", first.Status())
	}
	h := f.fetch()
	if h.Writer != "w2" {
		t.Fatalf("head names %q", h.Writer)
	}
	assertNoDuplicates(t, h.Entries, 2)
}

// TestDamagedObjectDetected flips a byte of a pack on the server's disk:
// the object fails its check instead of being handed on.
func TestDamagedObjectDetected(t *testing.T) {
	f := newFixture(t)
	v := f.write("a.txt", strings.Repeat("important\n", 100))
	r := f.start(f.bucket(), "w1")
	f.caughtUp(r)
	if err := r.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	packs, _ := filepath.Glob(filepath.Join(f.server.Dir, testBucket, f.loc.Prefix, "packs", "*"))
	if len(packs) != 1 {
		t.Fatalf("packs on the server: %v", packs)
	}
	data, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-3] ^= 0xff
	if err := os.WriteFile(packs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	h := f.fetch()
	if _, err := h.Object(context.Background(), v); !errors.Is(err, versionstore.ErrCorrupt) {
		t.Fatalf("damaged object: %v, want ErrCorrupt", err)
	}
	_, damaged, err := h.Objects(context.Background())
	if err != nil || len(damaged) != 1 || !errors.Is(damaged[0], versionstore.ErrCorrupt) {
		t.Fatalf("objects: %v, damaged %v", err, damaged)
	}
}

// TestOutageCatchesUp kills the server during a burst of writes: the
// store goes on, the status says the remote is unreachable, and once the
// server is back everything is shipped.
func TestOutageCatchesUp(t *testing.T) {
	f := newFixture(t)
	r := f.start(f.bucket(), "w1")
	for i := range 20 {
		f.write(fmt.Sprintf("f%d", i), fmt.Sprint(i))
	}
	f.server.Stop()
	for i := range 200 {
		f.write(fmt.Sprintf("g%d", i), fmt.Sprint(i))
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.Status().Error == "" {
		if time.Now().After(deadline) {
			t.Fatal("no error in the status while the server is down")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := r.Status(); st.ErrorSince.IsZero() {
		t.Fatalf("status %+v", st)
	}
	f.server.Restart()
	f.caughtUp(r)
	if err := r.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if st := r.Status(); st.Error != "" {
		t.Fatalf("status after catching up: %+v", st)
	}
	assertNoDuplicates(t, f.fetch().Entries, 220)
}

// TestOtherHistoryRefused: a workspace whose journal is shorter than what
// the prefix holds (another workspace's, or this one's state lost) is
// refused even with Takeover: its entries would be numbered into a
// history that is not theirs and those up to the prefix's skipped.
func TestOtherHistoryRefused(t *testing.T) {
	f := newFixture(t)
	for i := range 3 {
		f.write(fmt.Sprintf("f%d", i), "x")
	}
	r := f.start(f.bucket(), "w1")
	f.caughtUp(r)
	if err := r.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	other, err := versionstore.Open(t.TempDir(), filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = Start(context.Background(), other, f.bucket(), Options{Writer: "w2", Takeover: true})
	if !errors.Is(err, ErrOtherHistory) {
		t.Fatalf("a fresh workspace taking over a prefix with 3 entries: %v, want ErrOtherHistory", err)
	}
}
