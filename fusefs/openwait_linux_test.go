// An open through the mount that waits on another process — a FIFO's
// reader, a lease's break — must hold nothing of the daemon's meanwhile.

package fusefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

// An open for writing through the mount that waits on another process —
// for a FIFO's reader, or for the break of a lease — waited in the daemon
// while it held the file's lock and the lock a directory rename takes
// exclusively: the next rename of a directory waited behind it, and then
// every create, open for writing, flush and release, the tool writes
// (their invalidation waits on the kernel's rename) and every lookup and
// listing in the directories the rename locked, for every user, until the
// open returned (a lease's break gives up after lease-break-time, 45 s;
// a FIFO waits for ever). Nobody can set either up, in a world-writable
// directory of the backing tree:
//
//   - fifo: a name the kernel caches as a regular file comes to hold a
//     FIFO, made straight in the backing directory within the watcher's
//     window;
//   - lease: the backing file's owner takes a read lease on it.
func TestOpenThatWaitsHoldsNothing(t *testing.T) {
	stalls := []struct {
		name string
		arm  func(t *testing.T, m *mounted, rel string, become func() error) (release func())
		want uint32 // the type of file the open gives once released
	}{
		{"fifo", armFifo, unix.S_IFIFO},
		{"lease", armLease, unix.S_IFREG},
	}
	attackers := []struct {
		name  string
		as    func() error // credentials (nil: the test's, root's)
		mount func(*testing.T, ...func(*Options)) *mounted
		dir   string // where the attacker may write in the backing tree
	}{
		{"root", nil, mountT, ""},
		{"nobody", becomeNobody, mountShared, "pub/"},
	}
	for _, s := range stalls {
		for _, a := range attackers {
			t.Run(s.name+"/"+a.name, func(t *testing.T) {
				// A change straight in the backing directory goes unseen, as
				// one within the watcher's 100 ms of the daemon's own would.
				m := a.mount(t, func(o *Options) { o.selfWindow = time.Hour })
				for _, err := range []error{
					os.Mkdir(filepath.Join(m.mnt, "d"), 0o755),
					os.WriteFile(filepath.Join(m.mnt, "d/x"), []byte("x\n"), 0o644),
					os.WriteFile(filepath.Join(m.mnt, "g.txt"), []byte("g\n"), 0o644),
				} {
					if err != nil {
						t.Fatal(err)
					}
				}
				rel := a.dir + "f"
				mnt := filepath.Join(m.mnt, rel)
				runAs(t, a.as, func() error { return os.WriteFile(mnt, []byte("a file\n"), 0o644) })
				release := s.arm(t, m, rel, a.as)
				if fi, err := os.Lstat(mnt); err != nil || !fi.Mode().IsRegular() {
					t.Fatalf("the kernel no longer caches %s as a regular file (%v, %v): nothing to test", rel, fi, err)
				}
				tid, opened := openAside(mnt, a.as)
				var pending []chan error
				t.Cleanup(func() { awaitReleased(t, release, opened, pending, true) })
				if !testfuse.WaitFor(5*time.Second, func() bool { return inSyscall(tid, unix.SYS_OPENAT) }) {
					t.Fatal("the open never got under way")
				}
				// A daemon that waits holding the file's lock shows it here;
				// one that holds nothing is waited out.
				testfuse.WaitFor(500*time.Millisecond, func() bool { return m.fs.mount.Locks().Len() > 0 })
				if pending = m.othersGoOn(t); len(pending) > 0 {
					return
				}
				o := awaitReleased(t, release, opened, nil, false)
				var st unix.Stat_t
				if o.err != nil {
					t.Fatalf("open for writing: %v, want a file of type %o", o.err, s.want)
				}
				if err := unix.Fstat(o.fd, &st); err != nil || st.Mode&unix.S_IFMT != s.want {
					t.Fatalf("open for writing gave mode %o (%v), want a file of type %o", st.Mode, err, s.want)
				}
				if s.want == unix.S_IFIFO && m.fs.writers.Writing(rel) {
					t.Errorf("%s counts as being written after the FIFO's open", rel)
				}
			})
		}
	}
}

// truncate(2) of a file on which another process holds a read lease waits
// for the lease's break. The daemon waited holding the file's lock, so a
// tool write of the file waited as long (up to lease-break-time, 45 s),
// though its publish, a rename over the file, waits for no lease.
func TestTruncateWaitingOnALeaseHoldsNoToolWrite(t *testing.T) {
	m := mountT(t)
	p := filepath.Join(m.mnt, "f")
	if err := os.WriteFile(p, []byte("a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	release := armLease(t, m, "f", nil)
	tids, truncated, wrote := make(chan int, 1), make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		tids <- unix.Gettid()
		truncated <- unix.Truncate(p, 0)
	}()
	tid := <-tids
	t.Cleanup(func() {
		release()
		for _, done := range []chan error{truncated, wrote} {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("the truncate or the tool write still waits with the lease let go")
			}
		}
	})
	if !testfuse.WaitFor(5*time.Second, func() bool { return inSyscall(tid, unix.SYS_TRUNCATE) }) {
		t.Fatal("the truncate never got under way")
	}
	testfuse.WaitFor(500*time.Millisecond, func() bool { return m.fs.mount.Locks().Len() > 0 })
	go func() { wrote <- m.toolWrite("f", "tool\n") }()
	select {
	case err := <-wrote:
		wrote <- err // for the cleanup
		if err != nil {
			t.Fatalf("tool write: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a tool write of the file waits for a truncate waiting on a lease")
	}
}

// othersGoOn runs, while an open waits, what it must not hold up: a rename
// of a directory, a create, a write, a tool write and a listing, each
// within a bound. It returns those still running past it.
func (m *mounted) othersGoOn(t *testing.T) (pending []chan error) {
	bound := 5 * time.Second
	for _, op := range []struct {
		name string
		fn   func() error
	}{
		{"rename a directory", func() error { return os.Rename(filepath.Join(m.mnt, "d"), filepath.Join(m.mnt, "d2")) }},
		{"create a file", func() error { return os.WriteFile(filepath.Join(m.mnt, "c.txt"), []byte("c\n"), 0o644) }},
		{"write another file", func() error { return appendTo(filepath.Join(m.mnt, "g.txt")) }},
		{"write a file with a tool", func() error { return m.toolWrite("t.txt", "tool\n") }},
		{"list the root", func() error { _, err := os.ReadDir(m.mnt); return err }},
	} {
		done := make(chan error, 1)
		go func() { done <- op.fn() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", op.name, err)
			}
		case <-time.After(bound):
			t.Errorf("%s: not done within %v, while an open waits", op.name, bound)
			pending = append(pending, done)
			bound = time.Second // the rest wait behind it
		}
	}
	return pending
}

// armFifo swaps a FIFO in for rel, straight in the backing directory: the
// kernel still caches the file. The FIFO's open is released by a reader,
// in the backing directory (where the daemon may be opening it) or
// through the mount (where the kernel may).
func armFifo(t *testing.T, m *mounted, rel string, become func() error) func() {
	backing := filepath.Join(m.backing, rel)
	runAs(t, become, func() error {
		if err := unix.Unlink(backing); err != nil {
			return err
		}
		return unix.Mkfifo(backing, 0o666)
	})
	var readers []int
	t.Cleanup(func() {
		for _, fd := range readers {
			unix.Close(fd)
		}
	})
	return func() {
		for _, p := range []string{backing, filepath.Join(m.mnt, rel)} {
			if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
				readers = append(readers, fd)
			}
		}
	}
}

// armLease takes a read lease on rel's backing file, as its owner: an open
// for writing waits for it to be let go (or for lease-break-time).
func armLease(t *testing.T, m *mounted, rel string, become func() error) func() {
	// The writer that made the file is let go first (the kernel releases
	// it after close returns): a lease is refused while a file is open for
	// writing.
	if n := m.waitUnmarked(); n != 0 {
		t.Fatalf("%d files still being written", n)
	}
	fd := -1
	runAs(t, become, func() error {
		var err error
		if fd, err = unix.Open(filepath.Join(m.backing, rel), unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return err
		}
		// The kernel closes its own backing file a moment after.
		testfuse.WaitFor(2*time.Second, func() bool {
			_, err = unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_RDLCK)
			return err == nil
		})
		return err
	})
	t.Cleanup(func() { unix.Close(fd) })
	return func() { unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK) }
}

// awaitReleased releases a waiting open and returns its result; then, on
// cleanup, closes it and waits for the operations pending behind it.
func awaitReleased(t *testing.T, release func(), opened chan openResult, pending []chan error, cleanup bool) openResult {
	o := openResult{-1, errNotReturned}
	got := testfuse.WaitFor(10*time.Second, func() bool {
		select {
		case o = <-opened:
			return true
		default:
		}
		release()
		return false
	})
	if !got {
		t.Errorf("the open never returned")
		return o
	}
	if !cleanup {
		opened <- o // for the cleanup
		return o
	}
	if o.err == nil {
		unix.Close(o.fd)
	}
	for _, done := range pending {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("an operation still waits after the open returned")
		}
	}
	return o
}

var errNotReturned = errors.New("the open never returned")

// runAs runs fn with the credentials become gives a thread of its own (nil:
// the test's own) and fails the test on its error.
func runAs(t *testing.T, become func() error, fn func() error) {
	t.Helper()
	var err error
	if become == nil {
		err = fn()
	} else {
		onThread(t, become, func() { err = fn() })
	}
	if err != nil {
		t.Fatal(err)
	}
}

// openResult is what an open made aside returned.
type openResult struct {
	fd  int
	err error
}

// openAside opens p for writing on a thread of its own, with the
// credentials become gives it (nil: the test's), and returns the thread's
// id and where its result will come.
func openAside(p string, become func() error) (tid int, res chan openResult) {
	res = make(chan openResult, 1)
	tids := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		tids <- unix.Gettid()
		if become != nil {
			if err := become(); err != nil {
				res <- openResult{-1, err}
				return
			}
		}
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		res <- openResult{fd, err}
	}()
	return <-tids, res
}

// inSyscall reports whether the test's thread tid is blocked in system
// call nr.
func inSyscall(tid int, nr int) bool {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/syscall")
	return err == nil && strings.HasPrefix(string(b), strconv.Itoa(nr)+" ")
}

// toolWrite writes content to rel as a tool would.
func (m *mounted) toolWrite(rel, content string) error {
	tg, err := m.store.Resolve(rel, rel, "write")
	if err != nil {
		return err
	}
	_, err = m.store.WriteText(context.Background(), tg, content, versionstore.Intent{}, versionstore.ToolWriter("agent"))
	return err
}
