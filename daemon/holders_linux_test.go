package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Holders finds a process by its working directory and by a file it holds
// open, and leaves out the caller and processes elsewhere.
func TestHolders(t *testing.T) {
	mnt := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(mnt, "held"), nil, 0o644))
	start := func(dir, script string) int {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = dir
		must(cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process.Pid
	}
	inside := start(mnt, "exec sleep 30")
	opener := start("/", "exec 3<"+filepath.Join(mnt, "held")+"; exec sleep 30")
	start("/", "exec sleep 30")                   // elsewhere
	f, err := os.Open(filepath.Join(mnt, "held")) // the caller's own: left out
	must(err)
	defer f.Close()
	var hs []Holder
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if hs = Holders(mnt); len(hs) == 2 {
			break
		}
	}
	slices.SortFunc(hs, func(a, b Holder) int { return strings.Compare(a.Uses, b.Uses) })
	if len(hs) != 2 || hs[0].Pid != opener || hs[0].Uses != "open file" || hs[1].Pid != inside || hs[1].Uses != "working directory" {
		t.Fatalf("holders %+v, want pid %d with an open file and pid %d working there", hs, opener, inside)
	}
}

// A daemon that has exited but is not reaped yet is not alive: unmount
// waited for its parent to reap it.
func TestZombieIsNotAlive(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); !zombie(cmd.Process.Pid); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the child never showed as exited and unreaped")
		}
	}
	if processAlive(cmd.Process.Pid) {
		t.Fatal("an exited, unreaped process counts as alive")
	}
}

// The kernel's answer spares the walk of /proc for a mount nothing uses,
// leaves that mount mounted, and sends a mount in use to the walk, which
// names who uses it.
func TestIdleMountIsAskedOfTheKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("umount2(MNT_EXPIRE) and a tmpfs mount need root")
	}
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	if !idle(mnt) {
		t.Fatal("an unused mount is not idle")
	}
	if !mounted(t, mnt) {
		t.Fatal("asking whether the mount is idle unmounted it")
	}
	cmd := exec.Command("sh", "-c", "exec sleep 30")
	cmd.Dir = mnt
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var hs []Holder
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(hs) == 0; time.Sleep(20 * time.Millisecond) {
		hs = Holders(mnt)
	}
	if idle(mnt) || len(hs) != 1 || hs[0].Pid != cmd.Process.Pid {
		t.Fatalf("a mount with a process working in it: idle %v, holders %+v", idle(mnt), hs)
	}
}

func mounted(t *testing.T, dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// waitExit sees a process exit (here a child left unreaped) and gives up
// at its deadline on one that runs on.
func TestWaitExit(t *testing.T) {
	quick := exec.Command("true")
	slow := exec.Command("sleep", "30")
	for _, c := range []*exec.Cmd{quick, slow} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	if !waitExit(quick.Process.Pid, time.Now().Add(30*time.Second)) {
		t.Fatal("an exited process was not seen to exit")
	}
	if waitExit(slow.Process.Pid, time.Now().Add(100*time.Millisecond)) {
		t.Fatal("a running process was taken for exited")
	}
}
