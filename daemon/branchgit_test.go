package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestGitKindOf(t *testing.T) {
	const sha1, sha256 = "0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		rel  string
		want gitKind
	}{
		{"objects/01/" + sha1[2:], gitObject},
		{"objects/01/" + sha256[2:], gitObject},
		{"objects/pack/pack-" + sha1 + ".pack", gitObject},
		{"objects/pack/pack-" + sha1 + ".idx", gitObject},
		{"objects/pack/pack-" + sha256 + ".rev", gitObject},
		{"sharedindex." + sha1, gitObject},
		{"objects/01/tmp_obj_abc", gitLocal},
		{"objects/pack/tmp_pack_abc", gitLocal},
		{"objects/info/packs", gitLocal},
		{"objects/info/commit-graph", gitLocal},
		{"HEAD", gitRef},
		{"index", gitRef},
		{"packed-refs", gitRef},
		{"refs/heads/main", gitRef},
		{"refs/tags/v1", gitRef},
		{"refs/heads/main.lock", gitLocal},
		{"index.lock", gitLocal},
		{"config", gitSetting},
		{"description", gitSetting},
		{"hooks/pre-commit", gitSetting},
		{"info/exclude", gitSetting},
		{"logs/HEAD", gitLocal},
		{"logs/refs/heads/main", gitLocal},
		{"ORIG_HEAD", gitLocal},
		{"FETCH_HEAD", gitLocal},
		{"COMMIT_EDITMSG", gitLocal},
		{"MERGE_HEAD", gitLocal},
		{"rebase-merge/done", gitLocal},
		{"modules/m/HEAD", gitLocal},
		{"worktrees/w/HEAD", gitLocal},
	} {
		if got := gitKindOf(tc.rel); got != tc.want {
			t.Errorf("gitKindOf(%q) = %d, want %d", tc.rel, got, tc.want)
		}
	}
}

// TestRunGit: git as a merge runs it answers about a repository of another
// user, ignores the caller's GIT_* settings, and starts no program the
// repository's configuration names.
func TestRunGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	hook := filepath.Join(dir, "monitor.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(dir, "repo")
	gitT(t, dir, "init", "-q", "-b", "main", repo)
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "one")
	first := strings.TrimSpace(gitT(t, repo, "rev-parse", "HEAD"))
	gitT(t, repo, "commit", "-q", "--allow-empty", "-m", "two")
	gitT(t, repo, "config", "core.fsmonitor", hook)
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "-R", "65534:65534", repo).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v: %s", err, out)
		}
	}
	t.Setenv("GIT_DIR", dir)
	t.Setenv("GIT_INDEX_FILE", marker)
	ctx, gitDir := context.Background(), filepath.Join(repo, ".git")
	head := gitHead(ctx, gitDir)
	if !gitObjectName.MatchString(head) || head == first {
		t.Fatalf("gitHead = %q (first commit %s)", head, first)
	}
	if !gitIsAncestor(ctx, gitDir, first, head) || gitIsAncestor(ctx, gitDir, head, first) {
		t.Error("gitIsAncestor: wrong way round")
	}
	if _, code := runGit(ctx, gitDir, "diff-index", "--cached", "--quiet", "HEAD", "--"); code != 0 {
		t.Errorf("diff-index of a clean index: exit %d", code)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the repository's core.fsmonitor ran")
	}
	if h := gitHead(ctx, filepath.Join(dir, "none", ".git")); h != "" {
		t.Errorf("gitHead of no repository = %q", h)
	}
}

// gitT runs git in dir for the test, with a fixed identity.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return string(out)
}

// TestGitBehind: the workspace's file is behind the branch's when the two
// are the same bytes (or both absent), or, a ref, when it names an ancestor
// of the branch's commit; never the other way round.
func TestGitBehind(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	dir := t.TempDir()
	branch, main := filepath.Join(dir, "branch"), filepath.Join(dir, "main")
	gitT(t, dir, "init", "-q", "-b", "main", branch)
	gitT(t, branch, "commit", "-q", "--allow-empty", "-m", "one")
	one := gitT(t, branch, "rev-parse", "HEAD")
	gitT(t, branch, "commit", "-q", "--allow-empty", "-m", "two")
	two := gitT(t, branch, "rev-parse", "HEAD")
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(main, ".git", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("refs/heads/main", one)
	write("refs/heads/ahead", two)
	write("HEAD", "ref: refs/heads/other\n")
	gitT(t, branch, "update-ref", "refs/heads/ahead", strings.TrimSpace(one))
	r := gitRepos{branch: filepath.Join(branch, ".git"), main: filepath.Join(main, ".git")}
	ctx := context.Background()
	for rel, want := range map[string]bool{
		"refs/heads/main":  true,  // at an ancestor of the branch's
		"refs/heads/ahead": false, // the workspace's is ahead
		"HEAD":             false, // other bytes, not a ref
		"refs/tags/none":   true,  // absent on both sides
	} {
		if got := gitBehind(ctx, r, rel); got != want {
			t.Errorf("gitBehind(%s) = %v, want %v", rel, got, want)
		}
	}
}
