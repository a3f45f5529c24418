package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// A merge leaves in the branch the paths the workspace's .gitignore files
// ignore (node_modules/, build outputs), unless asked to include them: git
// itself decides, by `git check-ignore --stdin -z` over the branch's
// changed paths, with the workspace's backing directory as its work tree,
// so that every rule of git's (nested .gitignore files, negations, `**`,
// directory patterns, files tracked despite a pattern) is git's own. It
// runs with a scratch repository as its git directory, holding a copy of
// the workspace's index, and no configuration but its own: the daemon,
// often root, never runs a command a repository's config names (such as
// core.fsmonitor), and neither the user's global excludes nor
// .git/info/exclude apply. Where git is not installed nothing is ignored.

// ignoreCheckLimit bounds the git commands of one check: a .gitignore
// that is a FIFO (git waits for a writer), or a stalled disk, makes the
// merge fail, not hang. 10,000 paths take 57 ms.
var ignoreCheckLimit = 30 * time.Second

// ignoredBy runs git check-ignore on paths (slash-separated, relative to
// workTree) and returns those it ignores.
func ignoredBy(ctx context.Context, workTree string, paths []string) (map[string]bool, error) {
	git, err := exec.LookPath("git")
	if err != nil || len(paths) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ignoreCheckLimit)
	defer cancel()
	scratch, err := os.MkdirTemp("", "dshfs-check-ignore-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	gitDir := filepath.Join(scratch, "git")
	if _, err := runScratchGit(ctx, git, scratch, nil, "init", "-q", "--bare", "--template=", gitDir); err != nil {
		return nil, err
	}
	copyIndex(workTree, gitDir)
	out, err := checkIgnore(ctx, git, scratch, gitDir, workTree, paths)
	if err != nil {
		// An index git cannot read (a split index, a newer format) is
		// left out: every path is then checked as untracked.
		os.Remove(filepath.Join(gitDir, "index"))
		if out, err = checkIgnore(ctx, git, scratch, gitDir, workTree, paths); err != nil {
			return nil, err
		}
	}
	ignored := map[string]bool{}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			ignored[strings.TrimPrefix(p, "./")] = true
		}
	}
	return ignored, nil
}

// checkIgnore is check-ignore's answer: the ignored paths, each followed
// by a NUL. Its exit status 1 says that none is.
func checkIgnore(ctx context.Context, git, scratch, gitDir, workTree string, paths []string) ([]byte, error) {
	var b strings.Builder
	for _, p := range paths {
		if strings.HasPrefix(p, ":") {
			b.WriteString("./") // a path, not a pathspec's magic (which check-ignore refuses)
		}
		b.WriteString(p)
		b.WriteByte(0)
	}
	in := strings.NewReader(b.String())
	out, err := runScratchGit(ctx, git, scratch, in, "--git-dir="+gitDir, "--work-tree="+workTree,
		"-c", "safe.directory=*", "-c", "core.bare=false", "check-ignore", "--stdin", "-z")
	var ee *exec.ExitError
	if errors.As(errors.Unwrap(err), &ee) && ee.ExitCode() == 1 {
		return nil, nil
	}
	return out, err
}

// runScratchGit runs git with no configuration but the command line's.
func runScratchGit(ctx context.Context, git, scratch string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := gitCommand(ctx, git, scratch, args...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("git gave no answer in %v (is a .gitignore a FIFO?)", ignoreCheckLimit)
	}
	if err != nil {
		return nil, fmt.Errorf("git: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// gitCommand is git run in scratch, a private directory, isolated from
// any repository and configuration but what the command line names: no
// system, global or user configuration (HOME is scratch), no GIT_*
// variable of the daemon's, and no repository found above scratch. The
// daemon, often root, so never runs a command that someone's
// configuration names (core.fsmonitor, core.pager).
func gitCommand(ctx context.Context, git, scratch string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, git, args...)
	cmd.Dir = scratch
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + scratch, "XDG_CONFIG_HOME=" + scratch, "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_TERMINAL_PROMPT=0",
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(scratch)}
	cmd.WaitDelay = time.Second // once git is killed, for a child of its holding its output
	return cmd
}

// copyIndex copies the workspace's git index, a regular file at
// workTree/.git/index, into gitDir, so that tracked files are never taken
// for ignored ones; without it (no repository, a .git file) nothing is
// tracked.
func copyIndex(workTree, gitDir string) {
	f, err := os.OpenFile(filepath.Join(workTree, ".git", "index"), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	out, err := os.OpenFile(filepath.Join(gitDir, "index"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return
	}
	defer out.Close()
	if _, err := io.Copy(out, f); err != nil {
		os.Remove(out.Name())
	}
}

// symlinkDirs tells the paths below a directory that is a symbolic link in
// the work tree: git refuses to check them (and the whole batch with them),
// so they are checked by no rule and merged.
type symlinkDirs struct {
	workTree string
	seen     map[string]bool // directory: is a link
}

func (l symlinkDirs) beyond(key string) bool {
	for i := strings.IndexByte(key, '/'); i >= 0; i = nextSlash(key, i) {
		dir := key[:i]
		link, ok := l.seen[dir]
		if !ok {
			fi, err := os.Lstat(filepath.Join(l.workTree, filepath.FromSlash(dir)))
			link = err == nil && fi.Mode()&os.ModeSymlink != 0
			l.seen[dir] = link
		}
		if link {
			return true
		}
	}
	return false
}

func nextSlash(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// leaveIgnored takes out of changes the paths git ignores in the
// workspace and counts them by their first path element. Paths in .git/
// are never taken out here.
func leaveIgnored(ctx context.Context, workTree string, changes []versionstore.BranchChange) ([]versionstore.BranchChange, []versionstore.IgnoredPaths, error) {
	paths := make([]string, 0, len(changes))
	links := symlinkDirs{workTree: workTree, seen: map[string]bool{}}
	for _, c := range changes {
		if c.Key != ".git" && !strings.HasPrefix(c.Key, ".git/") && !links.beyond(c.Key) {
			paths = append(paths, c.Key)
		}
	}
	ignored, err := ignoredBy(ctx, workTree, paths)
	if err != nil || len(ignored) == 0 {
		return changes, nil, err
	}
	kept := changes[:0:0]
	count := map[string]int{}
	for _, c := range changes {
		if !ignored[c.Key] {
			kept = append(kept, c)
			continue
		}
		under := c.Key
		if i := strings.IndexByte(under, '/'); i >= 0 {
			under = under[:i+1]
		}
		count[under]++
	}
	return kept, ignoredList(count), nil
}

func ignoredList(count map[string]int) []versionstore.IgnoredPaths {
	out := make([]versionstore.IgnoredPaths, 0, len(count))
	for p, n := range count {
		out = append(out, versionstore.IgnoredPaths{Path: p, Files: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
