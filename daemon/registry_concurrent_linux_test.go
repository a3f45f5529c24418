package daemon

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// barrierRoot is the root of a mount whose daemon answers its record only
// once every mount of the barrier has been asked for its own.
type barrierRoot struct {
	fs.Inode
	b *barrier
}

type barrier struct {
	mu      sync.Mutex
	n       int
	arrived int
	all     chan struct{} // closed once n have arrived, or at cleanup
}

func (b *barrier) arrive() {
	b.mu.Lock()
	if b.arrived++; b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
}

var _ = (fs.NodeGetxattrer)((*barrierRoot)(nil))

func (r *barrierRoot) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr != fusefs.DaemonInfoXattr {
		return 0, syscall.ENODATA
	}
	r.b.arrive()
	select {
	case <-r.b.all:
	case <-time.After(30 * time.Second):
	}
	return 0, syscall.ENODATA
}

// The records of the mounts are read at once, not one after another: N
// mounts that are slow to answer cost one wait, not N. Each mount here
// answers only once all have been asked; read one at a time, all but the
// last would be given up as not answering.
func TestRecordsReadConcurrently(t *testing.T) {
	testfuse.Require(t)
	const n = 6
	b := &barrier{n: n, all: make(chan struct{})}
	var mnts []string
	for i := 0; i < n; i++ {
		mnt := t.TempDir()
		opts := &fs.Options{MountOptions: fuse.MountOptions{Name: "dshfs", FsName: filepath.Join(t.TempDir(), "src"), DirectMount: true}}
		srv, err := fs.Mount(mnt, &barrierRoot{b: b}, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Unmount() })
		mnts = append(mnts, mnt)
	}
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.arrived < b.n {
			b.arrived = b.n
			close(b.all)
		}
	})
	listed := make(chan []Entry, 1)
	go func() { listed <- ListMounts() }()
	var all []Entry
	select {
	case all = <-listed:
	case <-time.After(25 * time.Second):
		t.Fatal("listing the mounts did not return within 25 s")
	}
	notAnswering := 0
	for _, mnt := range mnts {
		e, ok := mountEntry(all, mnt)
		switch {
		case !ok:
			t.Errorf("%s is not listed", mnt)
		case e.Err == errNotAnswering:
			notAnswering++
		}
	}
	if notAnswering > 0 {
		t.Fatalf("%d of %d mounts given up as not answering: their records were not read at once", notAnswering, n)
	}
}

func mountEntry(all []Entry, mnt string) (Entry, bool) {
	for _, e := range all {
		if e.MountPoint == mnt {
			return e, true
		}
	}
	return Entry{}, false
}
