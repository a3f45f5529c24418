package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"
)

// TestScripts pins the CLI's behaviour as txtar scripts in testdata/script:
// the real binary, a real mount in the script's work directory, real shell
// writes. Each script's mount is detached at cleanup even if it fails.
func TestScripts(t *testing.T) {
	testfuse.Require(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(dshfsBin)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, ".state"))
			mnt := filepath.Join(env.WorkDir, "mnt")
			env.Setenv("MNT", mnt)
			env.Defer(func() {
				if testfuse.Mounted(mnt) {
					unix.Unmount(mnt, unix.MNT_DETACH)
				}
			})
			return os.MkdirAll(mnt, 0o755)
		},
	})
}
