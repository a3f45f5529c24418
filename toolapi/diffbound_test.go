package toolapi

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/udiff"
	"github.com/dshfs/dshfs/versionstore"
)

// heapPeak runs f and returns how far the heap's live objects grew above
// what they were before it, sampled every millisecond.
func heapPeak(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	base := read()
	done, peak := make(chan struct{}), make(chan uint64)
	go func() {
		p := base
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			p = max(p, read())
			select {
			case <-done:
				peak <- max(p, read())
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	return <-peak - base
}

// lines is n numbered lines, each written with format.
func lines(n int, format string) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, format, i)
	}
	return sb.String()
}

// countWriter counts the bytes written to it and keeps the first 1000.
type countWriter struct {
	n    int
	head []byte
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	if len(c.head) < 1000 {
		c.head = append(c.head, p[:min(len(p), 1000-len(c.head))]...)
	}
	return len(p), nil
}

// Two versions of two million lines, every line changed: the daemon's
// diff of them holds no more than the two versions and a bounded
// remainder, and says the files differ and how long they are. Just under
// the line limit, the diff is computed, in bounded memory too.
func TestDiffOfTwoHugeVersionsIsBoundedInMemory(t *testing.T) {
	for _, n := range []int{2_000_000, udiff.DefaultLimits.MaxLines - 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := newHarness(t)
			w := versionstore.Writer{Kind: versionstore.WriterMount, Pid: 7, Comm: "gen"}
			for _, format := range []string{"line %d of the old version\n", "LINE %d OF THE NEW VERSION\n"} {
				h.put("big.txt", lines(n, format))
				if _, err := h.store.AttachMount(nil).Refresh("big.txt", w); err != nil {
					t.Fatal(err)
				}
			}
			var d countWriter
			var err error
			growth := heapPeak(func() { err = h.svc.Diff(t.Context(), &d, "", "big.txt", "", "", 0) })
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("heap growth %d MiB, diff %d bytes", growth>>20, d.n)
			if growth > 256<<20 {
				t.Fatalf("diffing two %d-line versions grew the heap by %d MiB (limit 256)", n, growth>>20)
			}
			summary := fmt.Sprintf("(%d lines and %d lines;", n, n)
			if n > udiff.DefaultLimits.MaxLines && (!strings.Contains(string(d.head), summary) || d.n > 1000) {
				t.Fatalf("diff of %d bytes, want one line saying the files differ (%q):\n%s", d.n, summary, d.head)
			}
			if n <= udiff.DefaultLimits.MaxLines && d.n < 2*len(lines(n, "line %d of the old version\n")) {
				t.Fatalf("diff of %d bytes, want every line removed and added:\n%s", d.n, d.head)
			}
		})
	}
}

// A session diff cut at max_bytes stops diffing there: of ten changed
// files, it diffs no more than the ones whose diff it shows.
func TestSessionDiffStopsAtMaxBytes(t *testing.T) {
	h := newHarness(t)
	w := versionstore.Writer{Kind: versionstore.WriterMount, Pid: 7, Comm: "gen"}
	for i := range 10 {
		h.put(fmt.Sprintf("f%d.txt", i), "old\n")
	}
	if _, err := h.store.Checkpoint(t.Context(), "start", nil); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		name := fmt.Sprintf("f%d.txt", i)
		h.put(name, "new\n")
		if _, err := h.store.AttachMount(nil).Refresh(name, w); err != nil {
			t.Fatal(err)
		}
	}
	diffed := 0
	h.svc.diffing = func() { diffed++ }
	d := sessionDiffCut(t, h, SessionQuery{Since: "start"}, 150)
	if diffed > 2 || !strings.Contains(d, "max_bytes 150") {
		t.Fatalf("%d of 10 files diffed for a diff cut at 150 bytes; want at most 2:\n%s", diffed, d)
	}
}

// At most MaxConcurrentDiffs diffs run at once; one more waits, and gives
// up when its caller's context ends.
func TestConcurrentDiffsAreBounded(t *testing.T) {
	h := newHarness(t)
	w := versionstore.Writer{Kind: versionstore.WriterMount, Pid: 7, Comm: "gen"}
	const n = MaxConcurrentDiffs + 1
	for i := range n {
		h.put(fmt.Sprintf("f%d.txt", i), "old\n")
	}
	if _, err := h.store.Checkpoint(t.Context(), "start", nil); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("f%d.txt", i)
		h.put(name, "new\n")
		if _, err := h.store.AttachMount(nil).Refresh(name, w); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	running, most := 0, 0
	entered, leave := make(chan struct{}, n+1), make(chan struct{})
	h.svc.diffing = func() {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		entered <- struct{}{}
		<-leave
		mu.Lock()
		running--
		mu.Unlock()
	}
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := sessionDiff(t.Context(), h, SessionQuery{Since: "start", Paths: []string{fmt.Sprintf("f%d.txt", i)}}, 0)
			errs <- err
		}()
	}
	for range MaxConcurrentDiffs {
		<-entered
	}
	// The slots are taken: one more diff waits until its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	waiting := make(chan error, 1)
	go func() {
		_, err := sessionDiff(ctx, h, SessionQuery{Since: "start", Paths: []string{"f0.txt"}}, 0)
		waiting <- err
	}()
	var err error
	select {
	case err = <-waiting:
	case <-time.After(10 * time.Second):
		err = errors.New("still running 10 s later")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a diff while %d run: %v; want it to wait, and give up with its context", MaxConcurrentDiffs, err)
	}
	close(leave)
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if most > MaxConcurrentDiffs {
		t.Errorf("%d diffs ran at once, want at most %d", most, MaxConcurrentDiffs)
	}
}

// sessionDiffCut is the session's diff cut at max bytes.
func sessionDiffCut(t *testing.T, h *harness, q SessionQuery, max int) string {
	t.Helper()
	d, err := sessionDiff(t.Context(), h, q, max)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sessionDiff is the session's diff cut at max bytes, and its error.
func sessionDiff(ctx context.Context, h *harness, q SessionQuery, max int) (string, error) {
	var sb strings.Builder
	err := h.svc.SessionDiff(ctx, &sb, q, max)
	return sb.String(), err
}

// diffString is the diff of path between from and to, cut at max bytes.
func diffString(ctx context.Context, h *harness, path, from, to string, max int) (string, error) {
	var sb strings.Builder
	err := h.svc.Diff(ctx, &sb, "", path, from, to, max)
	return sb.String(), err
}
