package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"
)

// devFuseUnchanged fails the test if, by its end, the machine's /dev/fuse
// has another owner, group or mode, or was changed at all (its ctime moves
// on a chmod even when the mode is put back): a script gives a user access
// to FUSE in a mount namespace of its own (fusedev), never by changing the
// real node, which a killed run would leave changed for the whole machine.
func devFuseUnchanged(t *testing.T) {
	before, err := devFuseStat()
	if err != nil {
		return
	}
	t.Cleanup(func() {
		after, err := devFuseStat()
		if err != nil || after != before {
			t.Errorf("/dev/fuse was changed: %+v, then %+v (%v)", before, after, err)
		}
	})
}

// devFuseState is what a change to /dev/fuse would move.
type devFuseState struct {
	Mode, UID, GID uint32
	Ctime          syscall.Timespec
}

func devFuseStat() (devFuseState, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/dev/fuse", &st); err != nil {
		return devFuseState{}, err
	}
	return devFuseState{st.Mode, st.Uid, st.Gid, st.Ctim}, nil
}

// fusedevCmd, `fusedev UID:GID MODE`, gives the script a private mount
// namespace in which /dev/fuse is a node of its own (made with mknod in
// $WORK, character device 10,229, with that owner and mode): fusermount3,
// which opens /dev/fuse by that name, runs there as a normal user without
// a change to the machine's node. Commands enter the namespace through
// nsenter --mount --target $FUSENS (the pid of the process holding it); a
// second fusedev changes the node's owner and mode. At the end every mount
// of the namespace under $WORK is detached, and the holder killed.
func fusedevCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: fusedev UID:GID MODE")
	}
	var uid, gid int
	if _, err := fmt.Sscanf(args[0], "%d:%d", &uid, &gid); err != nil {
		ts.Fatalf("fusedev: owner %q is not UID:GID", args[0])
	}
	mode, err := strconv.ParseUint(args[1], 8, 32)
	ts.Check(err)
	dev := filepath.Join(ts.Getenv("WORK"), ".fusedev")
	if ts.Getenv("FUSENS") == "" {
		ts.Check(unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(10, 229))))
		holdFuseNamespace(ts, dev)
	}
	ts.Check(os.Chown(dev, uid, gid))
	ts.Check(os.Chmod(dev, os.FileMode(mode)))
}

// holdFuseNamespace starts the process that holds the namespace, with dev
// bound over /dev/fuse in it, and sets $FUSENS to its pid.
func holdFuseNamespace(ts *testscript.TestScript, dev string) {
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
		`mount --bind "$0" /dev/fuse && echo ready && exec sleep 3600`, dev)
	stdout, err := holder.StdoutPipe()
	ts.Check(err)
	holder.Stderr = os.Stderr
	ts.Check(holder.Start())
	pid := strconv.Itoa(holder.Process.Pid)
	ts.Defer(func() {
		detachInNamespace(pid, ts.Getenv("WORK"))
		holder.Process.Kill()
		holder.Wait()
	})
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		ts.Fatalf("fusedev: private mount namespace: %q %v", line, err)
	}
	ts.Setenv("FUSENS", pid)
}

// detachInNamespace detaches every mount below dir in the mount namespace
// of the process pid, the deepest first; their daemons then exit.
func detachInNamespace(pid, dir string) {
	b, _ := os.ReadFile("/proc/" + pid + "/mountinfo")
	var mnts []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mnts = append(mnts, f[4])
		}
	}
	for i := len(mnts) - 1; i >= 0; i-- {
		exec.Command("nsenter", "--mount", "--target", pid, "--", "umount", "-l", mnts[i]).Run()
	}
}
