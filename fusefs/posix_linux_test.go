package fusefs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// TestPosix runs go-fuse's POSIX conformance suite against the mount, every
// case; dshfs skips none. Three cases skip themselves on this machine:
// XAttrLarge (the ext4 backing directory refuses large xattrs: ENOSPC),
// RenameOpenDir (fstat of an open directory renamed over: go-fuse issue 55,
// dshfs stats by name) and Tmpfile (O_TMPFILE is not implemented).
func TestPosix(t *testing.T) {
	for name, fn := range posixtest.All {
		t.Run(name, func(t *testing.T) {
			m := mountT(t)
			fn(t, m.mnt)
		})
	}
}
