package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// A merge's text names its line merges and counts the git-ignored files it
// left in the branch, naming at most eight places.
func TestMergeTextLinesAndIgnored(t *testing.T) {
	v := versionstore.SumString("x")
	res := versionstore.MergeResult{Step: "merge:a", Applied: 1,
		Items: []versionstore.MergeItem{{Path: "f.go", Op: versionstore.OpMergeLines, Base: v, Main: v, Branch: v, Merged: v}}}
	for i := 0; i < 10; i++ {
		res.Ignored = append(res.Ignored, versionstore.IgnoredPaths{Path: fmt.Sprintf("d%d/", i), Files: i + 1})
	}
	got := stdoutOf(t, func() error { printMergeText(res); return nil })
	for _, want := range []string{"merge-lines f.go\n",
		"ignored 55 git-ignored files, left in the branch: d0/ (1), d1/ (2), d2/ (3), d3/ (4), d4/ (5), d5/ (6), d6/ (7), d7/ (8), and 2 more (--include-ignored merges them)\n",
		"merged 1 files as merge:a"} {
		if !strings.Contains(got, want) {
			t.Errorf("merge text %q lacks %q", got, want)
		}
	}
}
