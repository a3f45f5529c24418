package fusefs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

func TestActorsFollowAncestry(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	var a Actors
	mount := func(pid int) versionstore.Writer {
		return a.attribute(versionstore.Writer{Kind: versionstore.WriterMount, Pid: uint32(pid)})
	}
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })

	if w := mount(child.Process.Pid); w.Actor != "" {
		t.Fatalf("with nothing registered, actor %q", w.Actor)
	}
	if err := a.Register(os.Getpid(), "harness-1", 0); err != nil {
		t.Fatal(err)
	}
	if w := mount(child.Process.Pid); w.Actor != "harness-1" {
		t.Fatalf("a child of the registered process: actor %q, want harness-1", w.Actor)
	}
	if w := mount(os.Getppid()); w.Actor != "" {
		t.Fatalf("the registered process's parent: actor %q, want none", w.Actor)
	}
	if err := a.Register(child.Process.Pid, "inner", 0); err != nil {
		t.Fatal(err)
	}
	if w := mount(child.Process.Pid); w.Actor != "inner" {
		t.Fatalf("a process registered itself: actor %q, want the nearest, inner", w.Actor)
	}
	if w := a.attribute(versionstore.Writer{Kind: versionstore.WriterMount}); w.Actor != "" {
		t.Fatalf("the kernel's writeback (pid 0): actor %q", w.Actor)
	}
	if err := a.Register(1<<30, "x", 0); err == nil {
		t.Fatal("registering a process that does not exist succeeded")
	}
}

// A caller registers only its own processes (root any): a process of
// another user's was taken, and its writes, and its children's, were
// recorded under whatever name the caller chose.
func TestActorsRegisterOnlyTheCallersProcesses(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs /proc and root (to start a process as nobody)")
	}
	theirs := exec.Command("sleep", "30")
	theirs.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := theirs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { theirs.Process.Kill(); theirs.Wait() })
	const nobody, other = 65534, 1000
	var a Actors
	for _, c := range []struct {
		pid    int
		caller uint32
		ok     bool
	}{
		{theirs.Process.Pid, other, false},
		{os.Getpid(), nobody, false},
		{theirs.Process.Pid, nobody, true},
		{os.Getpid(), 0, true},
		{theirs.Process.Pid, 0, true},
	} {
		err := a.Register(c.pid, "a", c.caller)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrNotCallersProcess)) {
			t.Errorf("uid %d registers pid %d: %v, want ok %v", c.caller, c.pid, err, c.ok)
		}
	}
}

// fakeProcs stands in for /proc: pid → "start parent".
func fakeProcs(t *testing.T, procs map[uint32]string) {
	old := readStat
	readStat = func(pid uint32) ([]byte, error) {
		p, ok := procs[pid]
		if !ok {
			return nil, os.ErrNotExist
		}
		var start, parent uint64
		fmt.Sscan(p, &start, &parent)
		// pid (comm) state ppid, then 16 fields, the 20th after the name is the start time.
		f := fmt.Sprintf("%d (x y) S %d", pid, parent)
		for i := 0; i < 17; i++ {
			f += " 0"
		}
		return []byte(fmt.Sprintf("%s %d 0 0\n", f, start)), nil
	}
	t.Cleanup(func() { readStat = old })
}

// A pid is remembered with its start time: a write by a new process that
// got an exited one's pid within the second its answer is kept was
// recorded with the old process's actor.
func TestActorsPidReuseIsNotTheOldProcess(t *testing.T) {
	procs := map[uint32]string{50: "1 1", 100: "5 50"}
	fakeProcs(t, procs)
	var a Actors
	if err := a.Register(50, "harness", 0); err != nil {
		t.Fatal(err)
	}
	mount := func(pid uint32) string {
		return a.attribute(versionstore.Writer{Kind: versionstore.WriterMount, Pid: pid}).Actor
	}
	if got := mount(100); got != "harness" {
		t.Fatalf("a child of the registered process: %q", got)
	}
	procs[100] = "9 1" // exited; its pid now names an unrelated process
	if got := mount(100); got != "" {
		t.Fatalf("the pid's new process is attributed to %q", got)
	}
}

// Registered processes that exited are forgotten: the roots only grew.
func TestActorsForgetExitedRoots(t *testing.T) {
	procs := map[uint32]string{}
	fakeProcs(t, procs)
	var a Actors
	for pid := uint32(10); pid < 20; pid++ {
		procs[pid] = "1 1"
		if err := a.Register(int(pid), "a", 0); err != nil {
			t.Fatal(err)
		}
		delete(procs, pid) // it exits
	}
	procs[30] = "1 1"
	if err := a.Register(30, "b", 0); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	n := len(a.roots)
	a.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d registered processes remembered, want 1 (the 10 that exited forgotten)", n)
	}
}
