// A FIFO in the place of a file the kernel still caches as a regular one:
// opening it through the mount must hold nothing of the daemon's.

package fusefs

import (
	"context"
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

// A name the kernel cached as a regular file came to hold a FIFO, put
// straight into the backing directory within the watcher's window, and a
// process opened it for writing through the mount. The daemon opened the
// FIFO as asked, which waits for a reader, while it held the file's lock
// and the lock a directory rename takes exclusively: the next rename of a
// directory waited behind it, and then every create, open for writing,
// flush and release, the tool writes (their invalidation waits on the
// kernel's rename) and every lookup and listing in the directories the
// rename locked, for every user, until someone opened the FIFO. The
// attacker needs no privilege: nobody can make the swap in a
// world-writable directory of the backing tree.
func TestFifoUnderACachedFileHoldsNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		as    func() error // the attacker's credentials (nil: the test's, root's)
		mount func(*testing.T, ...func(*Options)) *mounted
		dir   string // where the attacker may write in the backing tree
	}{
		{"root", nil, mountT, ""},
		{"nobody", becomeNobody, mountShared, "pub/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The swap below goes unseen, as one within the watcher's
			// 100 ms of the daemon's own change to the name would.
			m := tc.mount(t, func(o *Options) { o.selfWindow = time.Hour })
			rel := tc.dir + "f"
			mnt, backing := filepath.Join(m.mnt, rel), filepath.Join(m.backing, rel)
			for _, err := range []error{
				os.Mkdir(filepath.Join(m.mnt, "d"), 0o755),
				os.WriteFile(filepath.Join(m.mnt, "d/x"), []byte("x\n"), 0o644),
				os.WriteFile(filepath.Join(m.mnt, "g.txt"), []byte("g\n"), 0o644),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
			runAs(t, tc.as, func() error { return os.WriteFile(mnt, []byte("a file\n"), 0o644) })
			runAs(t, tc.as, func() error {
				if err := unix.Unlink(backing); err != nil {
					return err
				}
				return unix.Mkfifo(backing, 0o666)
			})
			if fi, err := os.Lstat(mnt); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("the kernel no longer caches %s as a regular file (%v, %v): nothing to test", rel, fi, err)
			}

			tid, opened := openAside(mnt, tc.as)
			var pending []chan error
			t.Cleanup(func() { releaseFifo(t, backing, mnt, opened, pending) })
			if !testfuse.WaitFor(5*time.Second, func() bool { return inSyscall(tid, unix.SYS_OPENAT) }) {
				t.Fatal("the open of the FIFO never got under way")
			}
			// Before the fix the daemon holds the file's lock while it waits;
			// after it, nothing of the daemon's is held: this waits it out.
			testfuse.WaitFor(500*time.Millisecond, func() bool { return m.store.Locks().Len() > 0 })

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
					t.Errorf("%s: not done within %v, while a FIFO's open waits", op.name, bound)
					pending = append(pending, done)
					bound = time.Second // the rest wait behind it
				}
			}
			if len(pending) > 0 {
				return
			}

			// The open itself is the FIFO's, the kernel's own: it waits for a
			// reader through the mount, as it would natively.
			r, err := unix.Open(mnt, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatalf("open the FIFO for reading through the mount: %v", err)
			}
			defer unix.Close(r)
			select {
			case o := <-opened:
				opened <- o // for the cleanup
				var st unix.Stat_t
				if o.err != nil {
					t.Fatalf("open of the FIFO for writing: %v, want the FIFO", o.err)
				}
				if err := unix.Fstat(o.fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
					t.Fatalf("open of the FIFO for writing gave mode %o (%v), want a FIFO", st.Mode, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the FIFO's writer still waits with a reader there")
			}
			if n, k := m.fs.writers.Count(), m.store.Locks().Len(); n != 0 || k != 0 {
				t.Errorf("%d files being written and %d locks held after the FIFO's open", n, k)
			}
		})
	}
}

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

// releaseFifo ends a FIFO's open for writing, wherever it waits: it opens
// the FIFO for reading in the backing directory (where the daemon may be
// opening it) and through the mount (where the kernel may), until the open
// returns; then it waits for the operations pending behind it.
func releaseFifo(t *testing.T, backing, mnt string, opened chan openResult, pending []chan error) {
	var readers []int
	defer func() {
		for _, fd := range readers {
			unix.Close(fd)
		}
	}()
	var o openResult
	got := testfuse.WaitFor(10*time.Second, func() bool {
		select {
		case o = <-opened:
			return true
		default:
		}
		for _, p := range []string{backing, mnt} {
			if fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
				readers = append(readers, fd)
			}
		}
		return false
	})
	if !got {
		t.Errorf("the FIFO's open for writing never returned")
		return
	}
	if o.err == nil {
		unix.Close(o.fd)
	}
	for _, done := range pending {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("an operation still waits after the FIFO's open returned")
		}
	}
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
