package fusefs

import (
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// unmountOthers takes down the mount's other mount points (bind mounts of
// it: `dshfs mount` of a mounted directory makes them). The kernel ends the
// FUSE connection only when the last of them is gone, so an unmount of the
// first alone would leave the daemon serving the others, waiting. Each is
// unmounted, or detached if busy; one this process may not unmount is left.
func (f *FS) unmountOthers() {
	all, err := mountinfo.GetMounts(nil)
	if err != nil {
		return
	}
	var self *mountinfo.Info
	for _, m := range all {
		if m.Mountpoint == f.mnt {
			self = m
		}
	}
	if self == nil {
		return
	}
	for _, m := range all {
		if m.Mountpoint == f.mnt || m.Major != self.Major || m.Minor != self.Minor {
			continue
		}
		err := unix.Unmount(m.Mountpoint, 0)
		if err != nil {
			err = unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
		}
		if err != nil {
			f.log.Warn("a second mount point of the mount could not be unmounted", "mountpoint", m.Mountpoint, "err", err)
			continue
		}
		f.log.Info("unmounted a second mount point of the mount", "mountpoint", m.Mountpoint)
	}
}
