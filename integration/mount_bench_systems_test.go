package integration

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	"golang.org/x/sys/unix"
)

// A benchSystem is one way of serving a directory to the workloads: the
// backing filesystem itself, or a FUSE daemon started over a backing
// directory the way its users start it.
type benchSystem struct {
	name string
	// command starts the daemon serving backing at mnt; debug asks it to
	// log every request (to its standard error). nil: native, no daemon.
	command func(backing, mnt string, debug bool) *exec.Cmd
}

// The systems of BenchmarkMount, native first: every ratio is against a
// system measured in the same run.
const (
	sysNative   = "native"
	sysDshfs    = "dshfs"
	sysDshfsNoP = "dshfs-nopt"
	sysC        = "c-loopback"
	sysCURing   = "c-uring" // libfuse's passthrough_hp -o io_uring
	sysGoFuse   = "gofuse-loopback"
)

func benchSystems(b *testing.B, tools string) []benchSystem {
	cLoop, goLoop := buildCLoopback(b, tools), buildGoLoopback(b, tools)
	systems := []benchSystem{
		{name: sysNative},
		{name: sysDshfs, command: dshfsCommand(false)},
		{name: sysDshfsNoP, command: dshfsCommand(true)},
		{name: sysC, command: cLoopbackCommand(cLoop)},
		{name: sysGoFuse, command: func(backing, mnt string, debug bool) *exec.Cmd {
			args := append(debugArg(debug, "-debug"), "-q", "-directmount", mnt, backing)
			return exec.Command(goLoop, args...)
		}},
	}
	cURing, why := cURingSystem(b)
	if why != "" {
		b.Logf("%s left out: %s", sysCURing, why)
		return systems
	}
	return append(systems, cURing)
}

// cLoopbackCommand is libfuse's passthrough_ll at bin, caching as the
// kernel lets it.
func cLoopbackCommand(bin string) func(backing, mnt string, debug bool) *exec.Cmd {
	return func(backing, mnt string, debug bool) *exec.Cmd {
		args := []string{"-f", "-o", "source=" + backing + ",cache=always,timeout=30", mnt}
		return exec.Command(bin, append(debugArg(debug, "-d"), args...)...)
	}
}

func debugArg(debug bool, flag string) []string {
	if debug {
		return []string{flag}
	}
	return nil
}

// dshfsCommand is `dshfs mount --foreground` of the binary TestMain built,
// with its own state directory next to the backing one.
func dshfsCommand(noPassthrough bool) func(backing, mnt string, debug bool) *exec.Cmd {
	return func(backing, mnt string, debug bool) *exec.Cmd {
		args := []string{"mount", backing, mnt, "--foreground", "--state", backing + ".state"}
		if noPassthrough {
			args = append(args, "--no-passthrough")
		}
		return exec.Command(dshfsBin, append(args, debugArg(debug, "--debug")...)...)
	}
}

// buildCLoopback compiles libfuse's passthrough_ll example (libfuse3-dev,
// pkg-config) into dir.
func buildCLoopback(b *testing.B, dir string) string {
	examples := "/usr/share/doc/libfuse3-dev/examples"
	for _, name := range []string{"passthrough_ll.c", "passthrough_helpers.h"} {
		must(b, copyMaybeGzipped(filepath.Join(examples, name), filepath.Join(dir, name)))
	}
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "fuse3").Output()
	if err != nil {
		b.Skipf("pkg-config fuse3: %v (apt-get install libfuse3-dev fuse3 pkg-config)", err)
	}
	bin := filepath.Join(dir, "passthrough_ll")
	args := append([]string{"-O2", "-Wall", "-o", bin, filepath.Join(dir, "passthrough_ll.c")}, strings.Fields(string(flags))...)
	run(b, "", "gcc", args...)
	return bin
}

// copyMaybeGzipped copies src, or src.gz uncompressed, to dst.
func copyMaybeGzipped(src, dst string) error {
	var r io.Reader
	f, err := os.Open(src)
	if err == nil {
		r = f
	} else if f, err = os.Open(src + ".gz"); err == nil {
		if r, err = gzip.NewReader(f); err != nil {
			return err
		}
	} else {
		return err
	}
	defer f.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		return err
	}
	return out.Close()
}

// buildGoLoopback builds go-fuse's loopback example at the version go.mod
// requires.
func buildGoLoopback(b *testing.B, dir string) string {
	bin := filepath.Join(dir, "gofuse-loopback")
	run(b, "", "go", "build", "-o", bin, "github.com/hanwen/go-fuse/v2/example/loopback")
	return bin
}

// A served directory: where the workloads run, and the daemon serving it
// (none for native).
type served struct {
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *tailBuffer
}

// serveSystem starts sys over a fresh backing directory and returns the
// directory to work in; it is unmounted at cleanup whatever happens.
// debug, if set, receives the daemon's standard error.
func serveSystem(b *testing.B, sys benchSystem, debug io.Writer) *served {
	backing := b.TempDir()
	if sys.command == nil {
		return &served{dir: backing}
	}
	mnt := filepath.Join(b.TempDir(), "mnt")
	must(b, os.Mkdir(mnt, 0o755))
	s := &served{dir: mnt, cmd: sys.command(backing, mnt, debug != nil), exited: make(chan struct{}), stderr: &tailBuffer{}}
	s.cmd.Stderr = io.MultiWriter(s.stderr, orDiscard(debug))
	must(b, s.cmd.Start())
	go func() { s.cmd.Wait(); close(s.exited) }()
	b.Cleanup(s.stop)
	s.waitMounted(b, sys.name)
	return s
}

// restart stops s (if any) and serves sys over a new directory.
func (s *served) restart(b *testing.B, sys benchSystem, debug io.Writer) *served {
	if s != nil {
		s.stop()
	}
	return serveSystem(b, sys, debug)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func (s *served) waitMounted(b *testing.B, name string) {
	exited := false
	mounted := testfuse.WaitFor(20*time.Second, func() bool {
		select {
		case <-s.exited:
			exited = true
			return true
		default:
			return testfuse.Mounted(s.dir)
		}
	})
	switch {
	case exited:
		b.Fatalf("%s exited before mounting:\n%s", name, s.stderr)
	case !mounted:
		b.Fatalf("%s not mounted after 20 s:\n%s", name, s.stderr)
	}
}

// stop ends the daemon with SIGTERM, as a user would, and makes sure the
// mount is gone: killed after 30 s, then fusermount3 -u, then a lazy
// unmount. It may run twice.
func (s *served) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	if testfuse.Mounted(s.dir) {
		exec.Command("fusermount3", "-u", s.dir).Run()
	}
	if testfuse.Mounted(s.dir) {
		unix.Unmount(s.dir, mntDetach)
	}
}

// cpu is the daemon's user and system time so far (0 for native).
func (s *served) cpu(b *testing.B) time.Duration {
	if s.cmd == nil {
		return 0
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/stat")
	must(b, err)
	// Fields after the command's closing parenthesis start at field 3;
	// utime and stime are fields 14 and 15, in USER_HZ (100) ticks.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// settledCPU is the daemon's CPU time once it has stopped using any for
// 200 ms (at most 10 s): what a workload costs includes the releases and
// commits that follow it.
func (s *served) settledCPU(b *testing.B) time.Duration {
	last, quiet := s.cpu(b), 0
	for deadline := time.Now().Add(10 * time.Second); quiet < 2 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		now := s.cpu(b)
		if now == last {
			quiet++
		} else {
			last, quiet = now, 0
		}
	}
	return last
}

// tailBuffer keeps the last 8 KiB written: a daemon's last words. It may
// be read while the daemon still writes.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8192 {
		t.b = t.b[len(t.b)-8192:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard one for the
// daemons this process starts (Go raises its own, not its children's): the
// C loopback holds a descriptor for every inode the kernel knows.
// Workloads that make many files start on a fresh mount, which keeps each
// under the limit.
func raiseFileLimit(b *testing.B) {
	var lim syscall.Rlimit
	must(b, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	lim.Cur = lim.Max
	must(b, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Max < extractFiles+1000 {
		b.Skipf("RLIMIT_NOFILE %d: the C loopback needs a descriptor for each of %d files", lim.Max, extractFiles)
	}
}
