package integration

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// dshfsBin is the binary under test, built once by TestMain.
var dshfsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dshfs-bin-")
	if err != nil {
		panic(err)
	}
	// Scripts run it as an unprivileged user too.
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	dshfsBin = filepath.Join(dir, "dshfs")
	args := []string{"build", "-o", dshfsBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/dshfs")...)
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		panic("build dshfs: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dshfs runs the binary with a private state directory and returns stdout
// and the exit code.
func dshfs(t testing.TB, state string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(dshfsBin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String() + errOut.String(), ee.ExitCode()
	}
	t.Fatalf("run dshfs: %v", err)
	return "", -1
}

// The whole compare-and-swap story through the real binary: an agent's edit
// based on a read fails once a shell changed the file behind its back, and
// the history shows who wrote what. Observations persist between processes.
func TestExecStaleAfterShellWrite(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	file := filepath.Join(ws, "notes.txt")
	if err := os.WriteFile(file, []byte("alpha\nbeta\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(wantCode int, args ...string) string {
		t.Helper()
		out, code := dshfs(t, state, append([]string{"exec", "--backing", ws, "--actor", "agent-1"}, args...)...)
		if code != wantCode {
			t.Fatalf("dshfs %v: exit %d, want %d\n%s", args, code, wantCode, out)
		}
		return out
	}

	out := run(0, "read", `{"file_path":"notes.txt"}`)
	want := "<path>" + file + "</path>\n<type>file</type>\n<content>\n1: alpha\n2: beta\n\n(End of file - total 2 lines)\n</content>\n"
	if out != want {
		t.Fatalf("read output:\n%q\nwant\n%q", out, want)
	}
	if err := exec.Command("sh", "-c", "echo gamma >> "+file).Run(); err != nil {
		t.Fatal(err)
	}
	out = run(1, "edit", `{"file_path":"notes.txt","old_string":"beta","new_string":"BETA"}`)
	if out != `Error: cannot edit "`+file+`": file changed since it was read — re-read the file, then retry`+"\n" {
		t.Fatalf("stale edit output: %q", out)
	}
	run(0, "read", `{"file_path":"notes.txt","offset":3}`)
	out = run(0, "edit", `{"file_path":"notes.txt","old_string":"beta","new_string":"BETA"}`)
	if !strings.Contains(out, "has been updated successfully") {
		t.Fatalf("edit after re-read: %q", out)
	}
	if b, _ := os.ReadFile(file); string(b) != "alpha\nBETA\ngamma\n" {
		t.Fatalf("file = %q", b)
	}
	// Another actor has seen nothing.
	out, code := dshfs(t, state, "exec", "--backing", ws, "--actor", "agent-2", "edit", `{"file_path":"notes.txt","old_string":"gamma","new_string":"G"}`)
	if code != 1 || !strings.Contains(out, `edit requires reading "`+file+`" first — read the file, then retry`) {
		t.Fatalf("second actor: exit %d %q", code, out)
	}
}

func TestExecUsageErrors(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"exec", "--backing", ws, "nope", "{}"}, 2, `unknown tool "nope"`},
		{[]string{"exec", "--backing", ws, "read", "{not json"}, 2, "not valid JSON"},
		{[]string{"exec", "--backing", filepath.Join(ws, "missing"), "read", "{}"}, 3, "is not a directory"},
		{[]string{"exec", "--backing", ws, "read", `{"file_path":"../etc/passwd"}`}, 1, "outside the workspace"},
	} {
		out, code := dshfs(t, state, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.msg) {
			t.Errorf("dshfs %v: exit %d %q; want exit %d containing %q", tc.args, code, out, tc.code, tc.msg)
		}
	}
}
