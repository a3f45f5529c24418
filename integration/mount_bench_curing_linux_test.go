package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
)

// libfuseURing is the libfuse release whose passthrough_hp is BenchmarkMount's
// C server over io_uring: 3.18 is the first with FUSE over io_uring
// (-o io_uring); Debian 12's libfuse3 is 3.14.
const libfuseURing = "fuse-3.18.2"

// cURingSystem is libfuse's passthrough_hp -o io_uring, built once into
// the user's cache, with the fuse module's enable_uring switched on for
// the run and put back at the end; why says what is missing where it
// cannot be.
func cURingSystem(b *testing.B) (sys benchSystem, why string) {
	if _, err := os.Stat(enableURing); err != nil {
		return sys, "the kernel has no FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING)"
	}
	bin, err := buildCURing()
	if err != nil {
		return sys, err.Error()
	}
	keepURingParam(b)
	sys = benchSystem{name: sysCURing, command: func(backing, mnt string, debug bool) *exec.Cmd {
		must(b, os.WriteFile(enableURing, []byte("1"), 0))
		args := append(debugArg(debug, "--debug-fuse"), "--foreground", "-o", "io_uring", backing, mnt)
		return exec.Command(bin, args...)
	}}
	if why := checkURingServer(b, sys); why != "" {
		return benchSystem{}, why
	}
	return sys, ""
}

// checkURingServer mounts sys once and reports why not if its daemon has no
// io_uring instance: libfuse serves over /dev/fuse, silently, where the
// kernel does not offer io_uring.
func checkURingServer(b *testing.B, sys benchSystem) string {
	s := serveSystem(b, sys, nil)
	defer s.stop()
	fds := filepath.Join("/proc", strconv.Itoa(s.cmd.Process.Pid), "fd")
	if testfuse.WaitFor(10*time.Second, func() bool { return hasURing(fds) }) {
		return ""
	}
	return sys.name + " mounted without an io_uring instance: the kernel serves it over /dev/fuse"
}

// hasURing reports whether a process (its /proc/PID/fd) has an io_uring.
func hasURing(fds string) bool {
	ents, _ := os.ReadDir(fds)
	for _, e := range ents {
		if target, _ := os.Readlink(filepath.Join(fds, e.Name())); target == "anon_inode:[io_uring]" {
			return true
		}
	}
	return false
}

// buildCURing builds passthrough_hp at libfuseURing with io_uring (meson,
// ninja, a C++ compiler, liburing-dev and libnuma-dev) from LIBFUSE_GIT (a
// clone, a bare git directory or a URL; GitHub by default) into
// ~/.cache/dshfs/libfuse-<tag>, once: a build that completed leaves a
// stamp there.
func buildCURing() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "dshfs", "libfuse-"+libfuseURing)
	bin, stamp := filepath.Join(dir, "build", "example", "passthrough_hp"), filepath.Join(dir, ".built")
	if _, err := os.Stat(stamp); err == nil {
		return bin, nil
	}
	if err := cURingTools(); err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := mesonBuild(dir); err != nil {
		return "", fmt.Errorf("build passthrough_hp (%s): %w", libfuseURing, err)
	}
	return bin, os.WriteFile(stamp, []byte(libfuseURing+"\n"), 0o644)
}

// cURingTools says what is missing to build libfuse with io_uring.
func cURingTools() error {
	var missing []string
	for _, tool := range []string{"git", "meson", "ninja", "c++", "pkg-config"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, lib := range []string{"liburing", "numa"} {
		if exec.Command("pkg-config", "--exists", lib).Run() != nil {
			missing = append(missing, lib+" (pkg-config)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cannot build libfuse %s with io_uring: no %s (apt-get install git meson ninja-build g++ pkg-config liburing-dev libnuma-dev)",
			libfuseURing, strings.Join(missing, ", "))
	}
	return nil
}

// mesonBuild checks libfuse out into dir/src and builds passthrough_hp in
// dir/build, checking that meson found what io_uring needs.
func mesonBuild(dir string) error {
	origin := os.Getenv("LIBFUSE_GIT")
	if origin == "" {
		origin = "https://github.com/libfuse/libfuse"
	}
	src, build := filepath.Join(dir, "src"), filepath.Join(dir, "build")
	steps := [][]string{
		{"git", "-c", "advice.detachedHead=false", "clone", "--quiet", "--branch", libfuseURing, origin, src},
		{"meson", "setup", build, src, "-Dexamples=true", "-Dutils=false", "-Dtests=false", "-Dbuildtype=release"},
	}
	for _, step := range steps {
		if out, err := exec.Command(step[0], step[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(step, " "), err, out)
		}
	}
	config, err := os.ReadFile(filepath.Join(build, "fuse_config.h"))
	if err != nil {
		return err
	}
	if !bytes.Contains(config, []byte("#define HAVE_URING")) {
		return errors.New("meson configured libfuse without io_uring (liburing with SQE128 and libnuma needed)")
	}
	if out, err := exec.Command("ninja", "-C", build, "example/passthrough_hp").CombinedOutput(); err != nil {
		return fmt.Errorf("ninja: %w\n%s", err, out)
	}
	return nil
}

// Where the tools to build the C server over io_uring are missing, the
// benchmark says which, and how to install them, instead of failing.
func TestCURingToolsSaysWhatIsMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := cURingTools()
	if err == nil {
		t.Fatal("no tools on PATH, and cURingTools found nothing missing")
	}
	for _, want := range []string{"meson", "ninja", "liburing (pkg-config)", "apt-get install"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
}
