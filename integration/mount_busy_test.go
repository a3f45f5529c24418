package integration

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// holdOpen starts a shell that holds the file at path open for writing
// until the returned function is called, and returns its pid.
func holdOpen(t *testing.T, path string) (pid int, release func()) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `exec 3>>"$0" && echo open && read x`, path)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	released := false
	release = func() {
		if !released {
			released = true
			stdin.Close()
			cmd.Wait()
		}
	}
	t.Cleanup(release)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "open\n" {
		t.Fatalf("the holder said %q, %v", line, err)
	}
	go io.Copy(io.Discard, stdout)
	return cmd.Process.Pid, release
}

// A tool's edit or write of a file a process holds open for writing through
// the mount is refused with what is true: who holds it, and to retry once
// it is closed, not "changed since it was read" (nothing changed: a model
// would re-read and retry for ever). Once it is closed, the same edit goes
// through without a re-read.
func TestToolRefusedWhileAProcessWritesTheFile(t *testing.T) {
	w := mountWorkspace(t)
	must(t, os.WriteFile(w.path("f.txt"), []byte("alpha\n"), 0o644))
	w.read("a", "f.txt")
	pid, release := holdOpen(t, w.path("f.txt"))
	busy := `is being written by pid ` + strconv.Itoa(pid) + ` (sh) — retry after it closes`
	if r := w.edit("a", "f.txt", "alpha", "beta"); !r.IsError || !strings.Contains(r.Text, `cannot edit "`+w.path("f.txt")+`": file `+busy) {
		t.Fatalf("edit while held open: %s", r.Text)
	}
	if r := w.write("a", "f.txt", "gamma\n"); !r.IsError || !strings.Contains(r.Text, `cannot write "`+w.path("f.txt")+`": file `+busy) {
		t.Fatalf("write while held open: %s", r.Text)
	}
	release()
	deadline := time.Now().Add(10 * time.Second)
	r := w.edit("a", "f.txt", "alpha", "beta")
	for r.IsError && strings.Contains(r.Text, "being written") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the kernel releases a closed file after close returns
		r = w.edit("a", "f.txt", "alpha", "beta")
	}
	if r.IsError || w.content("f.txt") != "beta\n" {
		t.Fatalf("edit once closed: %s; file %q", r.Text, w.content("f.txt"))
	}
}
