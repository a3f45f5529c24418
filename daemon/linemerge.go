package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// A merge's line merge (--lines) is git merge-file itself: `git
// merge-file -p workspace base branch` on the three versions, written to
// a private scratch directory, with git isolated from any repository and
// configuration (gitCommand). Its verdict and merged bytes are then git's
// by construction. Exit status 0 is a clean merge (the merged bytes on
// stdout), 1 to 127 the number of conflicts (the file stays a conflict),
// anything else a failure, which fails the merge.

// lineMergeLimit bounds one git merge-file: a 16 MiB merge takes well
// under a second, so one that takes this long is stuck.
var lineMergeLimit = 30 * time.Second

// lineMergeNames are the scratch files of the three versions, in the order
// git merge-file takes them.
var lineMergeNames = [3]string{"workspace", "base", "branch"}

// lineMergeMax bounds git merge-file's output: a longer merged file stays
// a conflict.
var lineMergeMax = versionstore.MergeLinesMax

// gitLineMerge is the line merge by the git on the daemon's PATH, or an
// error that says git is needed.
func gitLineMerge() (versionstore.LineMerge, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return nil, errors.New("--lines runs git merge-file, and there is no git on the daemon's PATH; install git")
	}
	return func(ctx context.Context, base, main, branch []byte) ([]byte, bool, error) {
		return mergeFile(ctx, git, base, main, branch)
	}, nil
}

// mergeFile runs git merge-file on the three versions.
func mergeFile(ctx context.Context, git string, base, main, branch []byte) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, lineMergeLimit)
	defer cancel()
	scratch, err := os.MkdirTemp("", "dshfs-merge-file-")
	if err != nil {
		return nil, false, err
	}
	defer os.RemoveAll(scratch)
	for i, data := range [3][]byte{main, base, branch} {
		if err := writeScratch(filepath.Join(scratch, lineMergeNames[i]), data); err != nil {
			return nil, false, err
		}
	}
	cmd := gitCommand(ctx, git, scratch, "merge-file", "-p", "--", lineMergeNames[0], lineMergeNames[1], lineMergeNames[2])
	stdout := &cappedBuffer{max: lineMergeMax}
	stderr := &cappedBuffer{max: 4 << 10, quiet: true}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	return mergeFileVerdict(ctx, stdout, stderr, err)
}

// mergeFileVerdict reads git merge-file's exit status.
func mergeFileVerdict(ctx context.Context, stdout, stderr *cappedBuffer, err error) ([]byte, bool, error) {
	var ee *exec.ExitError
	switch {
	case stdout.over:
		return nil, false, versionstore.ErrMergedTooLong
	case ctx.Err() == context.DeadlineExceeded:
		return nil, false, fmt.Errorf("git merge-file gave no answer in %v", lineMergeLimit)
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case err == nil:
		return stdout.b, true, nil
	case errors.As(err, &ee) && ee.ExitCode() >= 1 && ee.ExitCode() <= 127:
		return nil, false, nil // the number of conflicts
	}
	return nil, false, fmt.Errorf("git merge-file: %w: %s", err, strings.TrimSpace(string(stderr.b)))
}

// writeScratch writes a new file, for the daemon's user alone.
func writeScratch(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// cappedBuffer keeps at most max bytes of what is written to it: past
// them it fails the write (so that the writer, git, stops on a closed
// pipe), or with quiet drops the rest.
type cappedBuffer struct {
	b     []byte
	max   int
	quiet bool
	over  bool
}

var errCapped = errors.New("output too long")

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - len(c.b)
	if len(p) <= room {
		c.b = append(c.b, p...)
		return len(p), nil
	}
	c.b = append(c.b, p[:room]...)
	if c.quiet {
		return len(p), nil
	}
	c.over = true
	return room, errCapped
}
