package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The advice for a FUSE device closed to the user: a group of its own when
// no group may use it (never "the group that owns it", root's), joining its
// group when that group may; chmod 0666 either way; and the udev caveat.
func TestDevFuseHint(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root: this test must run")
		}
		t.Skip("giving the device's stand-in to another group needs root")
	}
	dev := filepath.Join(t.TempDir(), "fuse") // a regular file: only its owner and mode are read
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		gid  int
		mode os.FileMode
		want string
	}{
		{0, 0o600, " (root:root, mode 0600) is not open to uid 65534 (nobody): as root, give it a group of its own and add the user to it (groupadd -f fuse; chgrp fuse " + dev + "; chmod 0660 " + dev + "; usermod -aG fuse nobody; then log in again), or open it to every user (chmod 0666 " + dev + "); udev may set it back at the next boot"},
		{0, 0o660, "give it a group of its own"}, // root's group is no group to join
		{1, 0o640, "give it a group of its own"}, // the group may not write it
		{1, 0o660, ", mode 0660) is not open to uid 65534 (nobody): as root, add the user to its group (usermod -aG " + groupName(1) + " nobody; then log in again), or open it to every user"},
	} {
		if err := os.Chown(dev, 0, tc.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dev, tc.mode); err != nil {
			t.Fatal(err)
		}
		if got := devFuseHint(dev, 65534); !strings.Contains(got, tc.want) || strings.Contains(got, "the group that owns it") {
			t.Errorf("gid %d, mode %04o: %q, want it to hold %q", tc.gid, tc.mode, got, tc.want)
		}
	}
}
