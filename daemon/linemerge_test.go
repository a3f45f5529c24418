package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// needGit skips a test where git is not installed, except in CI, which
// installs it.
func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed; CI installs it")
		}
		t.Skip("git is not installed")
	}
}

// gitMergeT is the daemon's line merge, with its scratch directories made
// in a directory of the test's, which must be empty again after each merge.
func gitMergeT(t *testing.T) versionstore.LineMerge {
	t.Helper()
	needGit(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	merge, err := gitLineMerge()
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, base, main, branch []byte) ([]byte, bool, error) {
		merged, clean, err := merge(ctx, base, main, branch)
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("the line merge left %v in the temporary directory", left)
		}
		return merged, clean, err
	}
}

// TestGitLineMerge: the line merge is git merge-file's, verdict and bytes.
func TestGitLineMerge(t *testing.T) {
	merge := gitMergeT(t)
	const nine = "1\n2\n3\n4\n5\n6\n7\n8\n9\n"
	crlf := strings.ReplaceAll(nine, "\n", "\r\n")
	tests := []struct {
		name, base, main, branch string
		clean                    bool
		want                     string
	}{
		{"disjoint hunks", nine, "one\n" + nine[2:], nine[:16] + "nine\n", true, "one\n2\n3\n4\n5\n6\n7\n8\nnine\n"},
		{"an insertion and a deletion apart", nine, "0\n" + nine, nine[:12] + nine[14:], true, "0\n1\n2\n3\n4\n5\n6\n8\n9\n"},
		{"the same change on both sides", nine, "one\n" + nine[2:], "one\n" + nine[2:], true, "one\n" + nine[2:]},
		{"overlapping", nine, "1\ntwo\n" + nine[4:], "1\nTWO\n" + nine[4:], false, ""},
		{"adjacent lines", nine, "one\n" + nine[2:], "1\ntwo\n" + nine[4:], false, ""},
		{"insertions at the same place", nine, "0\n" + nine, "zero\n" + nine, false, ""},
		{"no trailing newline", "a\nb\nc\nd\ne", "A\nb\nc\nd\ne", "a\nb\nc\nd\nE", true, "A\nb\nc\nd\nE"},
		{"a final newline added and a first line changed", "a\nb\nc\nd\ne", "A\nb\nc\nd\ne", "a\nb\nc\nd\ne\n", true, "A\nb\nc\nd\ne\n"},
		{"a final newline both added and removed", "a\nb\nc\nd\ne\n", "a\nb\nc\nd\ne", "a\nb\nc\nd\nE\n", false, ""},
		{"CRLF", crlf, "one\r\n" + crlf[3:], crlf[:24] + "nine\r\n", true, "one\r\n" + crlf[3:24] + "nine\r\n"},
		{"CRLF against LF is a change", crlf, nine, crlf[:24] + "nine\r\n", false, ""},
		{"empty base, one side", "", "", "new\n", true, "new\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			merged, clean, err := merge(context.Background(), []byte(tt.base), []byte(tt.main), []byte(tt.branch))
			if err != nil || clean != tt.clean || tt.clean && string(merged) != tt.want {
				t.Errorf("merge = %q, clean %v, %v; want %q, clean %v", merged, clean, err, tt.want, tt.clean)
			}
		})
	}
}

// TestGitLineMergeIsolated: git runs with none of the daemon's GIT_*
// variables (here, GIT_TRACE, which would write a trace) and no
// repository around the scratch directory.
func TestGitLineMergeIsolated(t *testing.T) {
	merge := gitMergeT(t)
	trace := filepath.Join(t.TempDir(), "trace")
	t.Setenv("GIT_TRACE", trace)
	t.Setenv("GIT_DIR", filepath.Join(t.TempDir(), "no-repository"))
	merged, clean, err := merge(context.Background(), []byte("a\nb\nc\n"), []byte("A\nb\nc\n"), []byte("a\nb\nC\n"))
	if err != nil || !clean || string(merged) != "A\nb\nC\n" {
		t.Errorf("merge = %q, %v, %v", merged, clean, err)
	}
	if _, err := os.Stat(trace); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("git wrote the daemon's GIT_TRACE file (%v)", err)
	}
}

// TestGitLineMergeBounds: a merged file past its bound is ErrMergedTooLong,
// a merge past its time an error, and git's failure an error with what
// git said.
func TestGitLineMergeBounds(t *testing.T) {
	merge := gitMergeT(t)
	ctx := context.Background()
	base, main, branch := []byte("a\nb\nc\n"), []byte("A\nb\nc\n"), []byte("a\nb\nC\n")
	defer func(n int) { lineMergeMax = n }(lineMergeMax)
	lineMergeMax = 5
	if _, _, err := merge(ctx, base, main, branch); !errors.Is(err, versionstore.ErrMergedTooLong) {
		t.Errorf("merge of 6 bytes with a bound of 5: %v, want ErrMergedTooLong", err)
	}
	lineMergeMax = 6
	if merged, clean, err := merge(ctx, base, main, branch); err != nil || !clean || string(merged) != "A\nb\nC\n" {
		t.Errorf("merge of 6 bytes with a bound of 6 = %q, %v, %v", merged, clean, err)
	}
	defer func(d time.Duration) { lineMergeLimit = d }(lineMergeLimit)
	lineMergeLimit = -time.Second // past at once: the context is done before git starts
	if _, _, err := merge(ctx, base, main, branch); err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("merge past its time: %v", err)
	}
	lineMergeLimit = time.Minute
	if _, _, err := merge(ctx, base, []byte("a\x00b\n"), branch); err == nil || !strings.Contains(err.Error(), "binary") {
		t.Errorf("merge of a binary file: %v, want git's refusal", err)
	}
}

// TestGitLineMergeWithoutGit: without git on the PATH, a merge with Lines
// is refused as a branch request (HTTP 409) with a sentence that says to
// install git, before the branch's changes are read.
func TestGitLineMergeWithoutGit(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	b := &branches{all: map[string]*branch{"a": {}}}
	_, err := b.Merge(context.Background(), "a", versionstore.MergeOptions{Lines: true, DryRun: true})
	if !errors.Is(err, ErrBranch) || !strings.Contains(err.Error(), "install git") {
		t.Errorf("merge --lines without git: %v", err)
	}
}

// BenchmarkGitLineMerge: git merge-file of two sides' edits, 100 apart, of
// a file of n lines, with the scratch files and git's start.
func BenchmarkGitLineMerge(b *testing.B) {
	needGit(b)
	merge, err := gitLineMerge()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{100, 40_000} {
		var base, main, branch strings.Builder
		for i := range n {
			line := fmt.Sprintf("line %d of the file\n", i)
			base.WriteString(line)
			main.WriteString(map[bool]string{true: "main's " + line, false: line}[i%200 == 0])
			branch.WriteString(map[bool]string{true: "branch's " + line, false: line}[i%200 == 100])
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, clean, err := merge(context.Background(), []byte(base.String()), []byte(main.String()), []byte(branch.String())); err != nil || !clean {
					b.Fatal(clean, err)
				}
			}
		})
	}
}
