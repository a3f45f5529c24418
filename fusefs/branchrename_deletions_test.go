package fusefs

import (
	"os"
	"path/filepath"
	"testing"
)

// deletions are the keys a branch's Changes lists as deleted.
func deletions(t *testing.T, v *BranchView) map[string]bool {
	t.Helper()
	cs, err := v.Changes()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, c := range cs {
		if c.Data == nil && c.Version.IsZero() {
			out[c.Key] = true
		}
	}
	return out
}

// removeDir deletes the workspace's d/a and then d in the view, as rm -r does.
func removeDir(t *testing.T, v *BranchView) {
	t.Helper()
	if e := v.remove("d/a", false); e != 0 {
		t.Fatal(e)
	}
	if e := v.remove("d", true); e != 0 {
		t.Fatal(e)
	}
	if !deletions(t, v)["d/a"] {
		t.Fatal("d/a, deleted in the branch, is not listed as a deletion")
	}
}

func workspaceWithDirD(t *testing.T) *BranchView {
	ws := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(ws, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "d", "a"), []byte("a"), 0o644))
	return unmountedView(t, ws)
}

// A directory of the branch's own renamed over a workspace directory the
// branch emptied and deleted (rm d/*; rmdir d; mv new d): the merge must
// still delete the workspace's files that directory held. The rename drops
// the whiteouts below d; the deletion comes from d's mark.
func TestBranchRenameOverADeletedDirKeepsItsDeletions(t *testing.T) {
	v := workspaceWithDirD(t)
	removeDir(t, v)
	must(t, os.MkdirAll(filepath.Join(v.upper, "e"), 0o755))
	must(t, os.WriteFile(filepath.Join(v.upper, "e", "new"), []byte("n"), 0o644))
	if e := v.renameDir("e", "d", 0); e != 0 {
		t.Fatal(e)
	}
	if !deletions(t, v)["d/a"] {
		t.Error("after mv e d, the branch shows d/a gone but Changes does not list its deletion: a merge would keep it")
	}
}

// A directory deleted and made again in the branch (opaque), then renamed
// away (rm -r d; mkdir d; mv d z): d/a stays deleted.
func TestBranchRenameOfAnOpaqueDirKeepsItsDeletions(t *testing.T) {
	v := workspaceWithDirD(t)
	removeDir(t, v)
	must(t, os.Mkdir(filepath.Join(v.upper, "d"), 0o755)) // as Mkdir does
	must(t, v.index.set("d", entryOpaque))
	if e := v.renameDir("d", "z", 0); e != 0 {
		t.Fatal(e)
	}
	if _, err := v.resolve("d/a"); err == nil {
		t.Fatal("the view shows d/a again")
	}
	if !deletions(t, v)["d/a"] {
		t.Error("after mv d z, the branch shows d/a gone but Changes does not list its deletion: a merge would keep it")
	}
}
