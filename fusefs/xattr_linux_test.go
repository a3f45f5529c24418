// Extended attributes on a mount shared with other users.

package fusefs

import (
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// Listxattr listed trusted.* names to every caller. Natively only a caller
// with CAP_SYS_ADMIN sees them (the VFS already refuses reading or setting
// them to the others, before FUSE sees the request); security.* names are
// listed to everyone, natively too. Each caller must list through the
// mount what it lists on the backing file itself.
func TestTrustedXattrsAreListedOnlyToTheCapable(t *testing.T) {
	m := mountShared(t)
	m.putBacking("pub/f", "x")
	back := filepath.Join(m.backing, "pub/f")
	for _, name := range []string{"trusted.x", "user.y", "security.z"} {
		if err := unix.Lsetxattr(back, name, []byte("1"), 0); err != nil {
			t.Fatalf("set %s: %v", name, err)
		}
	}
	for _, tc := range []struct {
		who    string
		become func() error
		want   []string
	}{
		{"nobody", becomeNobody, []string{"security.z", "user.y"}},
		{"root without CAP_SYS_ADMIN", dropSysAdmin, []string{"security.z", "user.y"}},
		{"root", func() error { return nil }, []string{"security.z", "trusted.x", "user.y"}},
	} {
		var mounted, native []string
		var merr, nerr error
		onThread(t, tc.become, func() {
			mounted, merr = listXattrs(filepath.Join(m.mnt, "pub/f"))
			native, nerr = listXattrs(back)
		})
		if merr != nil || nerr != nil {
			t.Fatalf("%s: list: %v, natively %v", tc.who, merr, nerr)
		}
		slices.Sort(mounted)
		slices.Sort(native)
		if !slices.Equal(mounted, tc.want) || !slices.Equal(native, tc.want) {
			t.Errorf("%s lists %q through the mount and %q natively, want %q", tc.who, mounted, native, tc.want)
		}
	}
}
