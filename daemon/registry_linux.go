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
