// Package testfuse holds what the mount tests of several packages share:
// whether this machine can mount, whether a directory is a mount point
// now, and waiting for what the kernel or a daemon does after a call
// returns (WaitFor, ClockPast). It is for tests only; no program imports
// it.
package testfuse

import (
	"os"
	"strings"
	"testing"
)

// Require skips a mount test without /dev/fuse or root outside CI, and fails
// it in CI (CI=true), where a skipped mount test would hide a broken mount.
func Require(t testing.TB) {
	t.Helper()
	_, err := os.Stat("/dev/fuse")
	if err == nil && os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("mount tests need /dev/fuse and root in CI (stat /dev/fuse: %v, euid %d)", err, os.Geteuid())
	}
	t.Skip("needs /dev/fuse and root")
}

// Mounted reports whether dir is a mount point of this process's namespace.
func Mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return strings.Contains(string(b), " "+dir+" ")
}
