package toolapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dshfs/dshfs/udiff"
)

// The bounds on the diffs a person asks for (dshfs diff, the session's
// diff): how many run at once, how much each may print, and what is said
// in place of a diff too long to compute.

// MaxConcurrentDiffs is how many diffs the daemon computes at once. A diff
// holds both versions (up to the keep limit, 64 MiB each) and a few words a
// line; more requests wait their turn, for as long as their caller waits.
const MaxConcurrentDiffs = 2

// diffSlots bounds the diffs running at once.
type diffSlots chan struct{}

// acquire waits for a free slot, or for ctx to end.
func (d diffSlots) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("wait for another diff to finish: %w", err)
	}
	select {
	case d <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for another diff to finish: %w", ctx.Err())
	}
}

func (d diffSlots) release() { <-d }

// inDiffSlot runs diff holding one of the diff slots, once one is free or
// not at all if ctx ends first.
func (s *Service) inDiffSlot(ctx context.Context, diff func() error) error {
	if err := s.diffSlots.acquire(ctx); err != nil {
		return err
	}
	defer s.diffSlots.release()
	if s.diffing != nil {
		s.diffing()
	}
	return diff()
}

// writeUnified writes the unified diff of a and b; a pair too long to diff
// line by line is said to differ, with its lengths.
func writeUnified(w io.Writer, aName, bName string, a, b []byte) error {
	err := udiff.Write(w, aName, bName, a, b, 3, udiff.DefaultLimits)
	if long, ok := errors.AsType[*udiff.TooLongError](err); ok {
		_, err = fmt.Fprintf(w, "Files %s and %s differ (%d lines and %d lines; only files of up to %d lines are compared line by line)\n",
			aName, bName, long.OldLines, long.NewLines, long.MaxLines)
	}
	return err
}

// endCut ends a diff written through c: its last line, and, if c cut it,
// a line saying so, with how many of a session's files (files > 0) are not
// shown in full.
func endCut(w io.Writer, c *cutWriter, err error, left, files int) error {
	if err == nil {
		err = c.flush()
	}
	if !errors.Is(err, errCut) {
		return err
	}
	note := fmt.Sprintf("... rest of the diff not shown (max_bytes %d)\n", c.max)
	if files > 0 {
		note = fmt.Sprintf("... rest of the diff not shown (max_bytes %d; %d of %d changed files not shown in full)\n", c.max, left, files)
	}
	_, err = io.WriteString(w, note)
	return err
}

// errCut is returned by a cutWriter that has taken all it may.
var errCut = errors.New("diff cut at its byte limit")

// cutWriter passes on whole lines up to max bytes (0: no bound), then
// fails every write with errCut, so that the diff being written stops
// being computed rather than being computed and thrown away.
type cutWriter struct {
	w       io.Writer
	max     int
	left    int
	partial []byte // the start of a line not yet passed on
	cut     bool
}

func newCutWriter(w io.Writer, max int) *cutWriter {
	return &cutWriter{w: w, max: max, left: max}
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.cut {
		return 0, errCut
	}
	if c.max <= 0 {
		return c.w.Write(p)
	}
	if len(c.partial)+len(p) <= c.left {
		return c.pass(p, bytes.LastIndexByte(p, '\n')+1)
	}
	// Over the limit: pass on the whole lines that fit, then stop.
	fit := bytes.LastIndexByte(p[:max(min(c.left-len(c.partial), len(p)), 0)], '\n') + 1
	if _, err := c.pass(p[:fit], fit); err != nil {
		return 0, err
	}
	c.cut = true
	return fit, errCut
}

// pass writes the partial line before p and p's lines up to end, and
// keeps the rest of p as the next partial line.
func (c *cutWriter) pass(p []byte, end int) (int, error) {
	if end > 0 {
		if len(c.partial) > 0 {
			if _, err := c.w.Write(c.partial); err != nil {
				return 0, err
			}
			c.left -= len(c.partial)
			c.partial = c.partial[:0]
		}
		if _, err := c.w.Write(p[:end]); err != nil {
			return 0, err
		}
		c.left -= end
	}
	c.partial = append(c.partial, p[end:]...)
	return len(p), nil
}

// flush passes on a last line without a newline, if it fits.
func (c *cutWriter) flush() error {
	if c.cut || len(c.partial) == 0 {
		return nil
	}
	if c.max > 0 && len(c.partial) > c.left {
		c.cut = true
		return errCut
	}
	_, err := c.w.Write(c.partial)
	c.partial = c.partial[:0]
	return err
}
