package daemon

import (
	"strings"

	"golang.org/x/sys/unix"
)

// systemMounts lists the FUSE mounts (macFUSE) on the machine. The table
// does not say which FUSE filesystem a mount is: each is dshfs only if its
// root answers the daemon's record (Unsure).
func systemMounts() []systemMount {
	n, err := unix.Getfsstat(nil, unix.MNT_NOWAIT)
	if err != nil || n == 0 {
		return nil
	}
	buf := make([]unix.Statfs_t, n)
	if n, err = unix.Getfsstat(buf, unix.MNT_NOWAIT); err != nil {
		return nil
	}
	var out []systemMount
	for _, st := range buf[:n] {
		if !strings.Contains(cString(st.Fstypename[:]), "fuse") {
			continue
		}
		out = append(out, systemMount{MountPoint: cString(st.Mntonname[:]), Backing: cString(st.Mntfromname[:]), UID: int(st.Owner), Unsure: true})
	}
	return out
}

func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
