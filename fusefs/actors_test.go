package fusefs

import (
	"os"
	"os/exec"
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
	if err := a.Register(os.Getpid(), "harness-1"); err != nil {
		t.Fatal(err)
	}
	if w := mount(child.Process.Pid); w.Actor != "harness-1" {
		t.Fatalf("a child of the registered process: actor %q, want harness-1", w.Actor)
	}
	if w := mount(os.Getppid()); w.Actor != "" {
		t.Fatalf("the registered process's parent: actor %q, want none", w.Actor)
	}
	if err := a.Register(child.Process.Pid, "inner"); err != nil {
		t.Fatal(err)
	}
	if w := mount(child.Process.Pid); w.Actor != "inner" {
		t.Fatalf("a process registered itself: actor %q, want the nearest, inner", w.Actor)
	}
	if w := a.attribute(versionstore.Writer{Kind: versionstore.WriterMount}); w.Actor != "" {
		t.Fatalf("the kernel's writeback (pid 0): actor %q", w.Actor)
	}
	if err := a.Register(1<<30, "x"); err == nil {
		t.Fatal("registering a process that does not exist succeeded")
	}
}
