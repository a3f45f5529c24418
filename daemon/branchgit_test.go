package daemon

import "testing"

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
