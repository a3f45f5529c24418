package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// When a branch's HEAD, refs and index may replace the workspace's, asked
// of git itself. Ancestry is asked of the branch's repository: it holds the
// workspace's objects as at the branch point and every object the merge
// brings, so the merge stays one step with nothing applied when refused.

// gitTimeout bounds one git command of a merge; one that takes longer
// counts as a no (not a fast-forward).
const gitTimeout = 2 * time.Minute

// gitRefMax bounds the bytes of a ref file read to compare it.
const gitRefMax = 64 << 20

// gitRepos are a repository's directory in the branch (its private view)
// and in the workspace (its mount).
type gitRepos struct{ branch, main string }

// notFastForward says why the branch's HEAD, refs and index may not
// replace the workspace's ("": they may). They may when each of the
// workspace's HEAD, packed-refs and refs (but refs/dshfs/) is as at the
// branch point, as in the branch, or, a ref, at an ancestor of the
// branch's commit there (as after an earlier merge of the same branch);
// when the branch's HEAD commit descends from the workspace's; and when the
// workspace's index stages nothing new since the branch point.
func (b *branches) notFastForward(ctx context.Context, checkpoint, repo string, r gitRepos, main, commit string) (string, error) {
	moved, err := b.m.store.ChangedSince(checkpoint, func(key string) bool {
		kr, rel, ok := versionstore.GitPath(key)
		return ok && kr == repo && gitKindOf(rel) == gitRef && rel != "index" && !strings.HasPrefix(rel, gitRefsPrefix)
	})
	if err != nil {
		return "", err
	}
	for _, key := range moved {
		if !gitBehind(ctx, r, strings.TrimPrefix(key, repo+"/")) {
			return fmt.Sprintf("the workspace's %s changed since the branch point", key), nil
		}
	}
	if main != "" && (commit == "" || !gitIsAncestor(ctx, r.branch, main, commit)) {
		return fmt.Sprintf("the branch's HEAD does not descend from the workspace's (%.12s)", main), nil
	}
	return b.indexStaged(ctx, checkpoint, repo, r.main)
}

// gitBehind reports whether the workspace's file rel of the repository is
// as the branch's, or, a ref, names an ancestor of the branch's commit.
func gitBehind(ctx context.Context, r gitRepos, rel string) bool {
	main, merr := readRefFile(filepath.Join(r.main, filepath.FromSlash(rel)))
	branch, berr := readRefFile(filepath.Join(r.branch, filepath.FromSlash(rel)))
	switch {
	case errors.Is(merr, fs.ErrNotExist) && errors.Is(berr, fs.ErrNotExist):
		return true
	case merr != nil || berr != nil:
		return false
	case bytes.Equal(main, branch):
		return true
	}
	m, bc := strings.TrimSpace(string(main)), strings.TrimSpace(string(branch))
	return strings.HasPrefix(rel, "refs/") && gitObjectName.MatchString(m) && gitObjectName.MatchString(bc) &&
		gitIsAncestor(ctx, r.branch, m, bc)
}

// readRefFile reads a regular file, following no symlink and never
// waiting on a FIFO.
func readRefFile(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", name)
	}
	return io.ReadAll(io.LimitReader(f, gitRefMax))
}

// indexStaged says why the workspace's index may not be replaced: it
// changed since the branch point and stages something its HEAD does not
// hold ("": it may be).
func (b *branches) indexStaged(ctx context.Context, checkpoint, repo, mainDir string) (string, error) {
	changed, err := b.m.store.ChangedSince(checkpoint, func(key string) bool { return key == repo+"/index" })
	if err != nil || len(changed) == 0 {
		return "", err
	}
	if _, code := runGit(ctx, mainDir, "diff-index", "--cached", "--quiet", "HEAD", "--"); code == 0 {
		return "", nil
	}
	return fmt.Sprintf("the workspace's %s/index stages changes made since the branch point", repo), nil
}

// gitHead is the commit HEAD names in the repository gitDir ("": none).
func gitHead(ctx context.Context, gitDir string) string {
	out, code := runGit(ctx, gitDir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if code != 0 || !gitObjectName.MatchString(out) {
		return ""
	}
	return out
}

// gitIsAncestor reports whether commit a is b or an ancestor of it in the
// repository gitDir.
func gitIsAncestor(ctx context.Context, gitDir, a, b string) bool {
	_, code := runGit(ctx, gitDir, "merge-base", "--is-ancestor", a, b)
	return code == 0
}

// runGit runs git on the repository gitDir and returns its output, trimmed,
// and its exit status (-1: it did not run). The daemon may be root reading
// a user's repository: the system's and user's git configuration is not
// read, nothing is locked or written, and the repository's configuration
// starts no program (core.fsmonitor; the commands used run no hook).
func runGit(ctx context.Context, gitDir string, args ...string) (string, int) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	base := []string{"--git-dir=" + gitDir, "--work-tree=" + filepath.Dir(gitDir),
		"-c", "safe.directory=*", "-c", "core.fsmonitor=false"}
	cmd := exec.CommandContext(ctx, "git", append(base, args...)...)
	cmd.Dir = filepath.Dir(gitDir)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0"}
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimSpace(string(out)), 0
	case errors.As(err, &ee):
		return "", ee.ExitCode()
	}
	return "", -1
}
