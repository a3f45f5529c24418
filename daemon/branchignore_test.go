package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// TestLeaveIgnored: the workspace's .gitignore rules take node_modules/
// and build outputs out of a merge, but not a file the index tracks
// despite a pattern, a path below a symbolic link, or .git/.
func TestLeaveIgnored(t *testing.T) {
	needGit(t)
	wt := t.TempDir()
	write := func(rel, data string) {
		p := filepath.Join(wt, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".gitignore", "node_modules/\n*.o\n")
	write("src/.gitignore", "gen/\n")
	write("tracked.o", "t\n")
	if err := os.Symlink(t.TempDir(), filepath.Join(wt, "lnk")); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = wt
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+wt)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "-f", "tracked.o")
	var changes []versionstore.BranchChange
	for _, k := range []string{"node_modules/a/b.js", "node_modules/c.js", "src/main.c", "src/main.o", "src/gen/x.go", "tracked.o", "lnk/y.o", ".git/HEAD", "README.md"} {
		changes = append(changes, versionstore.BranchChange{Key: k})
	}
	kept, ignored, err := leaveIgnored(context.Background(), wt, changes)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range kept {
		keys = append(keys, c.Key)
	}
	if want := []string{"src/main.c", "tracked.o", "lnk/y.o", ".git/HEAD", "README.md"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("kept %q", keys)
	}
	want := []versionstore.IgnoredPaths{{Path: "node_modules/", Files: 2}, {Path: "src/", Files: 2}}
	if !reflect.DeepEqual(ignored, want) {
		t.Errorf("ignored %+v, want %+v", ignored, want)
	}
}

// TestLeaveIgnoredOutsideARepository: .gitignore files apply in a
// workspace that is no git repository too, and a path is never taken for
// a pathspec's magic or a pattern.
func TestLeaveIgnoredOutsideARepository(t *testing.T) {
	needGit(t)
	wt := t.TempDir()
	if err := os.WriteFile(filepath.Join(wt, ".gitignore"), []byte("*.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kept, ignored, err := leaveIgnored(context.Background(), wt, []versionstore.BranchChange{{Key: "a.log"}, {Key: "a.txt"}, {Key: ":(exclude)*.log"}, {Key: "*"}, {Key: ":/x.log"}})
	want := []versionstore.IgnoredPaths{{Path: ":(exclude)*.log", Files: 1}, {Path: ":/", Files: 1}, {Path: "a.log", Files: 1}}
	if err != nil || len(kept) != 2 || kept[0].Key != "a.txt" || kept[1].Key != "*" || !reflect.DeepEqual(ignored, want) {
		t.Errorf("leaveIgnored = %+v, %+v, %v", kept, ignored, err)
	}
}

// BenchmarkLeaveIgnored: the check of 10,000 changed paths, 9,000 of them
// in node_modules/, against a workspace's .gitignore.
func BenchmarkLeaveIgnored(b *testing.B) {
	needGit(b)
	wt := b.TempDir()
	if err := os.WriteFile(filepath.Join(wt, ".gitignore"), []byte("node_modules/\n*.o\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	changes := make([]versionstore.BranchChange, 0, 10000)
	for i := 0; i < 10000; i++ {
		k := fmt.Sprintf("src/f%d.go", i)
		if i%10 != 0 {
			k = fmt.Sprintf("node_modules/p%d/index.js", i)
		}
		changes = append(changes, versionstore.BranchChange{Key: k})
	}
	for b.Loop() {
		if _, ignored, err := leaveIgnored(context.Background(), wt, changes); err != nil || ignored[0].Files != 9000 {
			b.Fatal(ignored, err)
		}
	}
}

// TestLeaveIgnoredFIFO: a .gitignore that is a FIFO, on which git would
// wait for ever, fails the check within its bound.
func TestLeaveIgnoredFIFO(t *testing.T) {
	needGit(t)
	defer func(d time.Duration) { ignoreCheckLimit = d }(ignoreCheckLimit)
	ignoreCheckLimit = time.Second
	wt := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(wt, ".gitignore"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := leaveIgnored(context.Background(), wt, []versionstore.BranchChange{{Key: "a.o"}})
	if err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("leaveIgnored with a FIFO .gitignore: %v", err)
	}
}
