package integration

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
//
// $HOME is $WORK/home.
func TestScripts(t *testing.T) {
	testfuse.Require(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"exits": exitsCmd,
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(dshfsBin)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, ".state"))
			env.Setenv("HOME", filepath.Join(env.WorkDir, "home"))
			mnts := []string{filepath.Join(env.WorkDir, "mnt"), filepath.Join(env.WorkDir, "mnt2")}
			env.Setenv("MNT", mnts[0])
			env.Setenv("MNT2", mnts[1])
			env.Defer(func() { detachUnder(env.WorkDir) })
			for _, dir := range append(mnts, env.Getenv("HOME")) {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
			}
			return nil
		},
	})
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
		unix.Unmount(mnts[i], unix.MNT_DETACH)
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
