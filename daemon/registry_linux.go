package daemon

import (
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// fsType is what the kernel's mount table calls a dshfs mount.
const fsType = "fuse.dshfs"

// systemMounts lists every dshfs mount on the machine, whoever runs it,
// from the kernel's mount table (mountinfo parses it, escapes and all):
// mount point, backing directory (dshfs mounts name it as their source)
// and the uid that mounted it.
func systemMounts() []systemMount {
	table, err := mountinfo.GetMounts(mountinfo.FSTypeFilter(fsType))
	if err != nil {
		return nil
	}
	return dshfsMounts(table)
}

// dshfsMounts is the registry's view of the mount table's dshfs entries.
func dshfsMounts(table []*mountinfo.Info) []systemMount {
	out := make([]systemMount, 0, len(table))
	for _, m := range table {
		out = append(out, systemMount{MountPoint: m.Mountpoint, Backing: m.Source, UID: mountUID(m.VFSOptions)})
	}
	return out
}

// mountUID is the uid a FUSE mount's super options name (-1: none).
func mountUID(superOptions string) int {
	for _, o := range strings.Split(superOptions, ",") {
		if v, ok := strings.CutPrefix(o, "user_id="); ok {
			if uid, err := strconv.Atoi(v); err == nil {
				return uid
			}
		}
	}
	return -1
}

// sameMount reports whether the mount points a and b show one mount (one
// FUSE connection: a bind mount of the other), by the device numbers the
// mount table gives them; it never asks the mounts themselves.
func sameMount(a, b string) bool {
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return m.Mountpoint != a && m.Mountpoint != b, false
	})
	if err != nil {
		return false
	}
	var da, db []int
	for _, m := range ms {
		if m.Mountpoint == a {
			da = []int{m.Major, m.Minor}
		} else {
			db = []int{m.Major, m.Minor}
		}
	}
	return da != nil && db != nil && da[0] == db[0] && da[1] == db[1]
}

// otherMountPoints are the other mount points of the mount at mnt (bind
// mounts of it), from the mount table.
func otherMountPoints(mnt string) []string {
	ms, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil
	}
	var self *mountinfo.Info
	for _, m := range ms {
		if m.Mountpoint == mnt {
			self = m
		}
	}
	var out []string
	for _, m := range ms {
		if self != nil && m.Mountpoint != mnt && m.Major == self.Major && m.Minor == self.Minor {
			out = append(out, m.Mountpoint)
		}
	}
	return out
}
