package integration

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"
)

// TestScripts pins the CLI's behaviour as txtar scripts in testdata/script:
// the real binary, a real mount in the script's work directory, real shell
// writes. Every dshfs mount under a script's $WORK is detached at cleanup,
// even if the script fails. Besides testscript's own commands, scripts have:
//
//	exits N PROG [ARGS...]  run PROG; fail unless it exits with status N
//	fusedev UID:GID MODE    a mount namespace whose /dev/fuse is a node of the
//	                        script's own ($FUSENS: nsenter --mount --target)
//	flockdir DIR | -u       this process takes (-u: lets go) a flock on DIR,
//	                        as a daemon holds one on its backing directory
//	modproxy DIR            DIR: a module proxy (GOPROXY=file://DIR) with
//	                        the modules the checkout builds with
//	stdcache DIR            DIR: a build cache holding the standard library
//	                        as compiled for cmd/dshfs
//	[fusermount]            a setuid fusermount3 is installed (in CI: must be)
//	[user_allow_other]      /etc/fuse.conf lets users mount with allow_other
//
// $REPO is the checkout (for make), $HOME is $WORK/home, and
// $WORK/quickstart.sh holds the README's quick start, as written.
func TestScripts(t *testing.T) {
	testfuse.Require(t)
	devFuseUnchanged(t)
	quickstart, err := readmeQuickstart("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs("..")
	goEnv := goEnvVars(t)
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *updateScripts,
		WorkdirRoot:   traversableTempDir(t),
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"exits":     exitsCmd,
			"fusedev":   fusedevCmd,
			"flockdir":  flockdirCmd,
			"jsonfield": jsonfieldCmd,
			"modproxy":  modproxyCmd,
			"stdcache":  stdcacheCmd,
		},
		Condition: scriptCondition,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(dshfsBin)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, ".state"))
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("REPO", repo)
			env.Vars = append(env.Vars, goEnv...)
			mnts := []string{filepath.Join(env.WorkDir, "mnt"), filepath.Join(env.WorkDir, "mnt2")}
			env.Setenv("MNT", mnts[0])
			env.Setenv("MNT2", mnts[1])
			env.Defer(func() { detachUnder(env.WorkDir) })
			for _, dir := range append(mnts, env.Getenv("HOME")) {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
			}
			return os.WriteFile(filepath.Join(env.WorkDir, "quickstart.sh"), []byte(quickstart), 0o755)
		},
	})
}

// updateScripts rewrites the goldens the scripts compare against (cmp
// stdout want/...) with what the commands print now.
var updateScripts = flag.Bool("update", false, "rewrite the scripts' goldens")

// readmeQuickstart is the shell block that follows the quick start marker
// in the README: the test runs exactly what a new user reads.
func readmeQuickstart(readme string) (string, error) {
	b, err := os.ReadFile(readme)
	if err != nil {
		return "", err
	}
	const marker = "<!-- quickstart:"
	_, rest, ok := strings.Cut(string(b), marker)
	_, rest, _ = strings.Cut(rest, "-->")
	rest, opened := strings.CutPrefix(rest, "\n```sh\n")
	block, _, closed := strings.Cut(rest, "\n```\n")
	if !ok || !opened || !closed {
		return "", fmt.Errorf("%s has no sh block after a %q comment", readme, marker)
	}
	return block + "\n", nil
}

// goEnvVars passes the go command's caches and settings to scripts that
// build (make install), whose $HOME is not the test's.
func goEnvVars(t *testing.T) []string {
	names := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOTOOLCHAIN", "GOPROXY", "GOENV"}
	out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	var vars []string
	for i, v := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		vars = append(vars, names[i]+"="+v)
	}
	return vars
}

// traversableTempDir is a temporary directory that other users can pass
// through (mode 0711, and so is its parent), so that a script can give an
// unprivileged user a directory of its own inside $WORK.
func traversableTempDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// detachUnder detaches every FUSE mount below dir, whoever mounted it.
func detachUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var mnts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			mnts = append(mnts, fields[4])
		}
	}
	for i := len(mnts) - 1; i >= 0; i-- { // the deepest first
		unix.Unmount(mnts[i], mntDetach)
	}
}

func exitsCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	var ee *exec.ExitError
	if err := ts.Exec(args[1], args[2:]...); errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// flockdirCmd takes an exclusive flock on a directory in the test's own
// process, as a dshfs daemon does on its backing directory, until
// `flockdir -u` or the script's end.
func flockdirCmd(ts *testscript.TestScript, neg bool, args []string) {
	held, _ := flocksHeld.LoadOrStore(ts, new(int))
	fd := held.(*int)
	switch {
	case neg || len(args) != 1:
		ts.Fatalf("usage: flockdir DIR | flockdir -u")
	case args[0] == "-u" && *fd > 0:
		ts.Check(unix.Close(*fd))
		*fd = 0
	case args[0] != "-u" && *fd == 0:
		var err error
		*fd, err = unix.Open(ts.MkAbs(args[0]), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		ts.Check(err)
		ts.Defer(func() {
			if *fd > 0 {
				unix.Close(*fd)
			}
			flocksHeld.Delete(ts)
		})
		ts.Check(unix.Flock(*fd, unix.LOCK_EX|unix.LOCK_NB))
	default:
		ts.Fatalf("flockdir: one directory at a time")
	}
}

// flocksHeld is the descriptor each script's flockdir holds (0: none).
var flocksHeld sync.Map

// scriptCondition answers [root], [user_allow_other] and [fusermount]: a normal user mounts through a
// setuid fusermount3 (Debian's fuse3, which .ci/run installs). In CI its
// absence fails the script instead of skipping it.
func scriptCondition(cond string) (bool, error) {
	switch cond {
	case "root":
		return os.Geteuid() == 0, nil
	case "user_allow_other":
		b, _ := os.ReadFile("/etc/fuse.conf")
		return regexp.MustCompile(`(?m)^\s*user_allow_other\s*$`).Match(b), nil
	case "fusermount":
	default:
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	p, err := exec.LookPath("fusermount3")
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(p); err == nil && fi.Mode()&os.ModeSetuid == 0 {
			err = fmt.Errorf("%s is not setuid", p)
		}
	}
	if err != nil && os.Getenv("CI") == "true" {
		return false, fmt.Errorf("a normal user's mount needs a setuid fusermount3 (apt-get install fuse3): %w", err)
	}
	return err == nil, nil
}

// jsonfieldCmd prints, sorted and each once, the values of one field of the
// objects in the JSON array the last command printed: `jsonfield path`
// after `dshfs log --json` lists the paths changed; `-drop RE` leaves out
// values RE matches (a temporary file's random name). With `-set VAR N` it
// instead sets VAR to the field of the N-th object.
func jsonfieldCmd(ts *testscript.TestScript, neg bool, args []string) {
	var objs []map[string]any
	ts.Check(json.Unmarshal([]byte(ts.ReadFile("stdout")), &objs))
	switch {
	case neg:
	case len(args) == 4 && args[0] == "-set":
		n, err := strconv.Atoi(args[2])
		ts.Check(err)
		if n >= len(objs) {
			ts.Fatalf("jsonfield: %d objects, no %d-th", len(objs), n)
		}
		ts.Setenv(args[1], fmt.Sprint(objs[n][args[3]]))
		return
	case len(args) == 3 && args[0] == "-drop":
		fmt.Fprintln(ts.Stdout(), strings.Join(fieldValues(objs, args[2], regexp.MustCompile(args[1])), "\n"))
		return
	case len(args) == 1:
		fmt.Fprintln(ts.Stdout(), strings.Join(fieldValues(objs, args[0], nil), "\n"))
		return
	}
	ts.Fatalf("usage: jsonfield [-drop RE] FIELD | jsonfield -set VAR N FIELD")
}

// fieldValues are the values of field in objs, sorted, each once, but
// those drop matches.
func fieldValues(objs []map[string]any, field string, drop *regexp.Regexp) []string {
	seen := map[string]bool{}
	var vals []string
	for _, o := range objs {
		v, ok := o[field]
		s := fmt.Sprint(v)
		if ok && !seen[s] && (drop == nil || !drop.MatchString(s)) {
			seen[s] = true
			vals = append(vals, s)
		}
	}
	sort.Strings(vals)
	return vals
}
