package fusefs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
)

// testNoPassthrough runs every mount of the package's tests without kernel
// passthrough (DSHFS_TEST_PASSTHROUGH=off; make test runs the package both
// ways).
var testNoPassthrough = os.Getenv("DSHFS_TEST_PASSTHROUGH") == "off"

// testURing serves every mount of the package's tests over io_uring
// (DSHFS_TEST_TRANSPORT=uring; make test runs the package both ways). Where
// the kernel does not offer it the tests that mount are skipped, saying
// why; a mount served over /dev/fuse after all fails its test.
var testURing = os.Getenv("DSHFS_TEST_TRANSPORT") == "uring"

func TestMain(m *testing.M) {
	// The daemon must not apply a umask the kernel already applied; the
	// test process is both daemon and client.
	syscall.Umask(0)
	// The main goroutine keeps the main thread: a test thread locked and
	// given other credentials (onThread) is wedged, not ended, if it is
	// the main thread, and the process's /proc status — the main thread's
	// — would then say nobody for the rest of the run.
	runtime.LockOSThread()
	restore := keepURingParam()
	code := m.Run()
	restore()
	os.Exit(code)
}

// mounted is a dshfs mount over a fresh backing directory.
type mounted struct {
	t       *testing.T
	backing string
	mnt     string
	store   *versionstore.Store
	fs      *FS
}

// mountT mounts a workspace in t.TempDir() and unmounts it at cleanup, even
// when the test fails.
func mountT(t *testing.T, opts ...func(*Options)) *mounted {
	t.Helper()
	return mountWith(t, nil, opts...)
}

// mountWith is mountT with prep run on the backing directory before it is
// mounted.
func mountWith(t *testing.T, prep func(backing string), opts ...func(*Options)) *mounted {
	t.Helper()
	testfuse.Require(t)
	return mountAt(t, t.TempDir(), prep, opts...)
}

// mountAt is mountWith over the backing directory given.
func mountAt(t *testing.T, backing string, prep func(backing string), opts ...func(*Options)) *mounted {
	t.Helper()
	if testURing {
		if why := uringUnoffered(); why != "" {
			t.Skipf("DSHFS_TEST_TRANSPORT=uring: %s", why)
		}
	}
	m := &mounted{t: t, backing: backing, mnt: filepath.Join(t.TempDir(), "mnt")}
	if err := os.Mkdir(m.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if prep != nil {
		prep(m.backing)
	}
	var err error
	var fsys *FS
	m.store, err = versionstore.Open(m.backing, filepath.Join(t.TempDir(), "index.db"), versionstore.Options{
		AliasRoots: []string{m.mnt},
		OnPublish:  func(key string) { fsys.Invalidate(key) },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var o Options
	o.NoPassthrough = testNoPassthrough
	o.IOUring = testURing
	for _, f := range opts {
		f(&o)
	}
	fsys, err = Mount(m.mnt, m.store, o)
	if err != nil {
		m.store.Close()
		t.Fatal(err)
	}
	m.fs = fsys
	t.Cleanup(func() {
		if err := fsys.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		if err := m.store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
		if testfuse.Mounted(m.mnt) {
			t.Errorf("%s is still mounted", m.mnt)
		}
	})
	m.checkTransport(o)
	return m
}

// checkTransport fails a test run over io_uring whose mount the kernel
// serves over /dev/fuse: the run would pass without testing the transport.
func (m *mounted) checkTransport(o Options) {
	name, why := m.fs.Transport()
	switch {
	case testURing && o.IOUring && !o.uringRefused && name != "io_uring":
		m.t.Fatalf("DSHFS_TEST_TRANSPORT=uring, but served over %s: %s", name, why)
	case o.IOUring && why != "":
		m.t.Logf("served over %s: %s", name, why)
	}
}

// waitUnmarked waits, up to 2 s, for the store's dirty marks to clear: the
// kernel releases a closed file after close(2) returns. It returns how many
// are left.
func (m *mounted) waitUnmarked() int {
	m.t.Helper()
	dirty := 0
	testfuse.WaitFor(2*time.Second, func() bool {
		st, err := m.store.Stats()
		if err != nil {
			m.t.Fatal(err)
		}
		dirty = st.Writing
		return dirty == 0
	})
	return dirty
}
