package toolapi

import (
	"os"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

func TestLatestChangeSkipsTheGapOfARenameOverSave(t *testing.T) {
	a, b := versionstore.SumString("a"), versionstore.SumString("b")
	del := versionstore.Version{}
	for _, tc := range []struct {
		name     string
		versions []versionstore.Version // newest first
		from, to versionstore.Version
		ok       bool
	}{
		{"two versions", []versionstore.Version{b, a}, a, b, true},
		{"a save that renamed the file away first", []versionstore.Version{b, del, a}, a, b, true},
		{"deleted now", []versionstore.Version{del, b, a}, b, del, true},
		{"the same bytes written back", []versionstore.Version{a, del, a, b}, b, a, true},
		{"one version", []versionstore.Version{a}, del, del, false},
		{"created after a deletion only", []versionstore.Version{a, del}, del, del, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h []versionstore.HistoryEntry
			for _, v := range tc.versions {
				h = append(h, versionstore.HistoryEntry{Version: v, Deleted: v.IsZero()})
			}
			from, to, ok := latestChange(h)
			if ok != tc.ok || ok && (from != tc.from || to != tc.to) {
				t.Fatalf("latestChange = %s, %s, %v; want %s, %s, %v", from.Short(), to.Short(), ok, tc.from.Short(), tc.to.Short(), tc.ok)
			}
		})
	}
}

// A file saved the way vim, git checkout and sed -i save (a new file renamed
// over the old, or the old renamed away first) diffs as a change of its
// content, not as a creation from /dev/null.
func TestDiffOfARenameOverSaveIsAContentDiff(t *testing.T) {
	h := newHarness(t)
	h.put("f.txt", "one\ntwo\n")
	mustOK(t, h.read(agent, "f.txt"))
	if err := os.Rename(h.backing("f.txt"), h.backing("f.txt~")); err != nil {
		t.Fatal(err)
	}
	mustFail(t, h.read(agent, "f.txt"), versionstore.CodeNotFound, `cannot read "`+h.disp("f.txt")+`": not found`)
	h.put("f.txt", "one\nTWO\n")
	mustOK(t, h.read(agent, "f.txt"))
	d, err := diffString(t.Context(), h, "f.txt", "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d, "/dev/null") || !strings.Contains(d, "-two\n+TWO\n") {
		t.Fatalf("diff:\n%s", d)
	}
}

// A file the agent only read, then changed straight in the backing
// directory, can be restored: the read kept the bytes it read.
func TestReadKeepsTheBytesItRead(t *testing.T) {
	h := newHarness(t)
	h.put("seen.txt", "as the agent read it\n")
	mustOK(t, h.read(agent, "seen.txt"))
	h.put("seen.txt", "changed behind dshfs's back\n")
	mustOK(t, h.read(agent, "seen.txt"))
	hist, err := h.svc.History("", "seen.txt")
	if err != nil || len(hist) != 2 || !hist[0].Kept || !hist[1].Kept {
		t.Fatalf("history %+v, %v: want both versions kept", hist, err)
	}
	before := versionstore.SumString("as the agent read it\n")
	if _, _, err := h.svc.Restore(t.Context(), "", "seen.txt", before.String(), "me"); err != nil {
		t.Fatal(err)
	}
	if got := h.get("seen.txt"); got != "as the agent read it\n" {
		t.Fatalf("restored %q", got)
	}
}

// A diff cut at max bytes keeps the whole lines that fit, however the
// writes fall, and says it was cut.
func TestCutWriter(t *testing.T) {
	d := "--- a\n+++ b\n@@ -1 +1 @@\n-one\n+two\n"
	for _, tc := range []struct {
		max  int
		want string
	}{
		{0, d},
		{len(d), d},
		{len(d) - 1, "--- a\n+++ b\n@@ -1 +1 @@\n-one\n... rest of the diff not shown (max_bytes 33)\n"},
		{15, "--- a\n+++ b\n... rest of the diff not shown (max_bytes 15)\n"},
		{3, "... rest of the diff not shown (max_bytes 3)\n"},
	} {
		for _, chunk := range []int{1, 4, 7, len(d)} {
			var sb strings.Builder
			c := newCutWriter(&sb, tc.max)
			var err error
			for p := d; p != "" && err == nil; p = p[min(chunk, len(p)):] {
				_, err = c.Write([]byte(p[:min(chunk, len(p))]))
			}
			if err := endCut(&sb, c, err, 0, 0); err != nil || sb.String() != tc.want {
				t.Errorf("max %d, writes of %d: %q, %v; want %q", tc.max, chunk, sb.String(), err, tc.want)
			}
		}
	}
}
