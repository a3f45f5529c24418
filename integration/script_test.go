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
// writes. Each script's mounts ($MNT, $MNT2) are detached at cleanup even if it fails.
func TestScripts(t *testing.T) {
	testfuse.Require(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", filepath.Dir(dshfsBin)+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, ".state"))
			mnts := []string{filepath.Join(env.WorkDir, "mnt"), filepath.Join(env.WorkDir, "mnt2")}
			env.Setenv("MNT", mnts[0])
			env.Setenv("MNT2", mnts[1])
			env.Defer(func() {
				for _, mnt := range mnts {
					if testfuse.Mounted(mnt) {
						unix.Unmount(mnt, unix.MNT_DETACH)
					}
				}
			})
			for _, mnt := range mnts {
				if err := os.MkdirAll(mnt, 0o755); err != nil {
					return err
				}
			}
			return nil
		},
	})
}
