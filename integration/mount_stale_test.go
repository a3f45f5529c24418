package integration

import (
	"os/exec"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// Every way a shell, an editor or git changes a file through the mount makes
// an edit based on an earlier read stale; ways that keep the bytes do not.
func TestStaleThroughMount(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  string // run before the tool's read
		change string // run between the read and the edit
		stale  bool
	}{
		{"append", "", "echo three >> f.txt", true},
		{"sed -i", "", "sed -i s/two/TWO/ f.txt", true},
		{"vim-style save: temp file renamed over", "", "printf 'line one\\nline 2\\n' > .f.txt.tmp && mv .f.txt.tmp f.txt", true},
		{"vim", "", "vim --clean -es -c 'set backupcopy=no nobackup writebackup backupskip=' -c '%s/two/2/' -c 'wq' f.txt", true},
		{"truncate and rewrite in place", "", "printf 'line one\\nline zwei\\n' > f.txt", true},
		{"git checkout of another version", "git init -q && git add f.txt && git commit -qm v1 && printf 'line one\\nv2\\n' > f.txt && git commit -qam v2",
			"git checkout -q HEAD~1 -- f.txt", true},
		{"mv over the file", "", "printf 'other\\n' > g.txt && mv g.txt f.txt", true},
		{"touch", "", "touch f.txt", false},
		{"rewrite of identical bytes", "", "printf 'line one\\nline two\\n' > f.txt", false},
		{"git checkout of an unchanged file", "git init -q && git add f.txt && git commit -qm v1", "git checkout -q HEAD -- f.txt && touch f.txt", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "vim" {
				if _, err := exec.LookPath("vim"); err != nil {
					t.Skip("vim is not installed")
				}
			}
			w := mountWorkspace(t)
			w.sh("printf 'line one\\nline two\\n' > f.txt")
			if tc.setup != "" {
				w.sh(tc.setup)
			}
			w.read("agent", "f.txt")
			w.sh(tc.change)
			changed := w.content("f.txt")
			r := w.edit("agent", "f.txt", "line one", "LINE ONE")
			if tc.stale {
				wantCode(t, r, versionstore.CodeStaleVersion)
				if got := w.content("f.txt"); got != changed {
					t.Fatalf("content %q, want %q: the stale edit landed", got, changed)
				}
				if w.indexVersionBecomes("f.txt", versionstore.SumString(changed)) != versionstore.SumString(changed) {
					t.Fatal("the index does not hold the version of the changed bytes")
				}
				return
			}
			wantCode(t, r, "")
			if got := w.content("f.txt"); got != "LINE ONE\nline two\n" {
				t.Fatalf("content = %q", got)
			}
		})
	}
}
