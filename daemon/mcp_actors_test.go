package daemon

import (
	"path/filepath"
	"testing"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/versionstore"
)

// Sessions are numbered per client, never twice, and never onto an actor
// the policy still keeps reads of (a session of an earlier daemon).
func TestActorNamesAreEachSessionsOwn(t *testing.T) {
	store, err := versionstore.Open(t.TempDir(), filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	pol, err := policy.New(store.Observations(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pol.Observe("claude-code-2", "f", policy.Absent); err != nil {
		t.Fatal(err)
	}
	names := newActorNames(pol)
	for _, c := range []struct{ client, want string }{
		{"claude-code", "claude-code-1"},
		{"claude-code", "claude-code-3"}, // -2 is an earlier session's
		{"codex", "codex-1"},
		{"../codex", "codex-2"},
		{"", "mcp-1"},
	} {
		if got := names.name(c.client); got != c.want {
			t.Errorf("a session of %q is %q, want %q", c.client, got, c.want)
		}
	}
	if got := newActorNames(nil).name("codex"); got != "codex-1" {
		t.Errorf("without a policy: %q, want codex-1", got)
	}
}
