package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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
