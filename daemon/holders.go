package daemon

import (
	"fmt"
	"strings"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/internal/quote"
)

// Holder is a process that keeps a mount busy: an unmount now would strand
// it (its later calls there fail with ENOTCONN).
type Holder struct {
	Pid     int
	Command string
	Uses    string // "working directory", "open file", …
	Path    string
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d %s: %s %s", h.Pid, quote.Name(h.Command), h.Uses, quote.Name(h.Path))
}

// ErrDetachedInUse is returned by Stop when the daemon detached its mount
// lazily because processes still used it (the unmount's --lazy).
var ErrDetachedInUse = fusefs.ErrStillInUse

// DescribeHolders lists holders for a person, a line each, at most max
// (and how many more).
func DescribeHolders(hs []Holder, max int) string {
	var b strings.Builder
	for i, h := range hs {
		if i == max {
			fmt.Fprintf(&b, "  and %d more\n", len(hs)-max)
			break
		}
		fmt.Fprintf(&b, "  %s\n", h)
	}
	return b.String()
}
