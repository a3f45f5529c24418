package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeGit puts on the PATH a git that records its arguments, working
// directory, environment and the modes of its files and directory in
// record, prints "merged\n" and exits with the status written in exit.
// It is written once, before the test runs it.
func fakeGit(t *testing.T) (record, exit string) {
	t.Helper()
	bin, dir := t.TempDir(), t.TempDir()
	record, exit = filepath.Join(dir, "record"), filepath.Join(dir, "exit")
	script := fmt.Sprintf(`#!/bin/sh
{ echo "args: $*"; echo "dir: $(pwd)"; env | sort; stat -c 'mode %%n %%a' . workspace base branch; } > %q
printf 'merged\n'
exit "$(cat %q)"
`, record, exit)
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	return record, exit
}

// TestGitLineMergeRun: what git is run with (its arguments, a private
// working directory, files for the daemon's user alone, an environment
// of its own), and what each exit status means.
func TestGitLineMergeRun(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("GIT_DIR", "/elsewhere")
	record, exit := fakeGit(t)
	merge, err := gitLineMerge()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		exit  int
		clean bool
		err   bool
	}{{0, true, false}, {1, false, false}, {127, false, false}, {128, false, true}, {255, false, true}} {
		if err := os.WriteFile(exit, []byte(strconv.Itoa(tt.exit)), 0o644); err != nil {
			t.Fatal(err)
		}
		merged, clean, err := merge(context.Background(), []byte("b\n"), []byte("m\n"), []byte("r\n"))
		if clean != tt.clean || (err != nil) != tt.err || clean && string(merged) != "merged\n" {
			t.Errorf("git exiting %d: %q, clean %v, %v", tt.exit, merged, clean, err)
		}
		checkGitRun(t, tt.exit, record)
	}
}

// checkGitRun checks the record of one run of fakeGit.
func checkGitRun(t *testing.T, exit int, record string) {
	t.Helper()
	out, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{"args: merge-file -p -- workspace base branch\n", "\nGIT_CONFIG_NOSYSTEM=1\n",
		"\nGIT_CONFIG_GLOBAL=/dev/null\n", "\nGIT_CEILING_DIRECTORIES=" + os.TempDir() + "\n", "\nmode . 700\n",
		"\nmode workspace 600\n", "\nmode base 600\n", "\nmode branch 600\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("git exiting %d: its record lacks %q:\n%s", exit, want, got)
		}
	}
	dir := strings.TrimPrefix(strings.SplitN(got[strings.Index(got, "dir: "):], "\n", 2)[0], "dir: ")
	if !strings.Contains(got, "\nHOME="+dir+"\n") || strings.Contains(got, "GIT_DIR") || filepath.Dir(dir) != os.TempDir() {
		t.Errorf("git exiting %d: ran in %s with HOME elsewhere or the daemon's GIT_DIR:\n%s", exit, dir, got)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("git exiting %d: its directory %s is left (%v)", exit, dir, err)
	}
}
