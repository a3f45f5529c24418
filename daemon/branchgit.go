package daemon

import (
	"context"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/dshfs/dshfs/versionstore"
)

// A branch's git repositories (each directory named .git in it) merge by
// git's rules, not as files (docs/branches.md, ".git/ in a branch"):
//
//   - objects (loose, packs, split-index files) are named by their
//     content: a new one comes across, one the workspace has is left, none
//     is ever deleted;
//   - HEAD, refs, packed-refs and the index come across only as a
//     fast-forward; otherwise the branch's HEAD commit is kept in the
//     workspace as refs/dshfs/NAME and the workspace's are left alone;
//   - config, description, hooks/ and info/ come across with a repository
//     the branch made, and stay the branch's otherwise;
//   - the rest (logs/, ORIG_HEAD, FETCH_HEAD, COMMIT_EDITMSG, locks, a
//     rebase or merge under way, submodules' repositories) stays the
//     branch's.

// gitKind is how a file of a repository's directory merges.
type gitKind int

const (
	gitLocal   gitKind = iota // stays in the branch
	gitObject                 // comes across if new, never deleted
	gitRef                    // comes across as a fast-forward
	gitSetting                // comes across with a new repository
)

// gitObjectName is a commit's name (SHA-1 or SHA-256).
var gitObjectName = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// gitRefsPrefix names the refs that keep branches' commits in the
// workspace's repository.
const gitRefsPrefix = "refs/dshfs/"

// gitKindOf is how the file rel of a repository's directory merges.
func gitKindOf(rel string) gitKind {
	switch {
	case versionstore.GitObject(rel):
		return gitObject
	case strings.HasSuffix(rel, ".lock"):
		return gitLocal
	case rel == "HEAD" || rel == "index" || rel == "packed-refs" || strings.HasPrefix(rel, "refs/"):
		return gitRef
	case rel == "config" || rel == "description" || strings.HasPrefix(rel, "hooks/") || strings.HasPrefix(rel, "info/"):
		return gitSetting
	}
	return gitLocal
}

// gitRepoChanges are a branch's changes to one repository's directory
// whose merge depends on the workspace's repository.
type gitRepoChanges struct{ refs, settings []versionstore.BranchChange }

// gitChanges is what the merge applies of the branch's changes: those
// outside any repository's directory as they are, each repository's by its
// rules; with how each repository whose HEAD, refs or index the branch
// changed is merged.
func (b *branches) gitChanges(ctx context.Context, br *branch, changes []versionstore.BranchChange) ([]versionstore.BranchChange, []versionstore.GitMerge, error) {
	var out []versionstore.BranchChange
	repos := map[string]*gitRepoChanges{}
	for _, c := range changes {
		repo, rel, ok := versionstore.GitPath(c.Key)
		if !ok {
			out = append(out, c)
			continue
		}
		if repos[repo] == nil {
			repos[repo] = &gitRepoChanges{}
		}
		switch gitKindOf(rel) {
		case gitObject:
			if c.Version.IsZero() {
				continue // never deleted
			}
			has, err := b.m.store.Exists(c.Key)
			if err != nil {
				return nil, nil, err
			}
			if !has {
				out = append(out, c)
			}
		case gitRef:
			repos[repo].refs = append(repos[repo].refs, c)
		case gitSetting:
			repos[repo].settings = append(repos[repo].settings, c)
		}
	}
	return b.gitRepos(ctx, br, repos, out)
}

// gitRepos adds to out what the merge applies of each repository's refs and
// settings, and says how each repository whose refs changed is merged.
func (b *branches) gitRepos(ctx context.Context, br *branch, repos map[string]*gitRepoChanges, out []versionstore.BranchChange) ([]versionstore.BranchChange, []versionstore.GitMerge, error) {
	var gits []versionstore.GitMerge
	for _, repo := range sortedRepos(repos) {
		rc := repos[repo]
		settings, err := b.gitSettings(repo, rc.settings)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, settings...)
		if len(rc.refs) == 0 {
			continue
		}
		g, refs, err := b.gitRefs(ctx, br, repo, rc.refs)
		if err != nil {
			return nil, nil, err
		}
		out, gits = append(out, refs...), append(gits, g)
	}
	// A git command cut short by the end of the request answered no.
	return out, gits, ctx.Err()
}

// gitSettings is what the merge applies of the changes to a repository's
// settings (config, description, hooks, info): all of them with a
// repository the branch made, none to the workspace's own. They are a
// checkout's (an agent's user.email is not the workspace's), and some start
// programs (hooks, core.fsmonitor, aliases) that a branch must not slip
// into the workspace's git.
func (b *branches) gitSettings(repo string, settings []versionstore.BranchChange) ([]versionstore.BranchChange, error) {
	if len(settings) == 0 {
		return nil, nil
	}
	has, err := b.m.store.Exists(repo + "/HEAD")
	if has || err != nil {
		return nil, err
	}
	return settings, nil
}

func sortedRepos(m map[string]*gitRepoChanges) []string {
	repos := make([]string, 0, len(m))
	for r := range m {
		repos = append(repos, r)
	}
	sort.Strings(repos)
	return repos
}

// gitRefs is what the merge applies of the changes refs to the repository
// repo's HEAD, refs and index: all of them as a fast-forward, replacing
// the workspace's, else only the ref refs/dshfs/NAME, holding
// the branch's HEAD commit, when it is not the workspace's.
func (b *branches) gitRefs(ctx context.Context, br *branch, repo string, refs []versionstore.BranchChange) (versionstore.GitMerge, []versionstore.BranchChange, error) {
	g := versionstore.GitMerge{Repo: repo}
	r := gitRepos{branch: filepath.Join(br.dir, "view", filepath.FromSlash(repo)), main: filepath.Join(b.m.cfg.MountPoint, filepath.FromSlash(repo))}
	g.Commit = gitHead(ctx, r.branch)
	main := gitHead(ctx, r.main)
	why, err := b.notFastForward(ctx, br.meta.Checkpoint, repo, r, main, g.Commit)
	if err != nil {
		return g, nil, err
	}
	if g.Why = why; why == "" {
		g.FastForward = true
		for i := range refs {
			// The workspace's may have moved since the branch point: to an
			// ancestor (an earlier merge), or the index by a git status.
			refs[i].Force = true
		}
		return g, refs, nil
	}
	if g.Commit == "" || g.Commit == main {
		return g, nil, nil
	}
	g.Ref = gitRefsPrefix + br.meta.Name
	data := []byte(g.Commit + "\n")
	return g, []versionstore.BranchChange{{Key: repo + "/" + g.Ref, Version: versionstore.Sum(data), Data: data, Perm: 0o644, Force: true}}, nil
}
