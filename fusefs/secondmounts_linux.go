package fusefs

import (
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// OtherMountPoints are the other mount points of the mount at mnt (bind
// mounts of it: `dshfs mount` of a mounted directory makes them), from the
// mount table: the mount points with its device numbers. The mounts
// themselves are not asked.
func OtherMountPoints(mnt string) []string {
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

// unmountOthers takes down the mount's other mount points. The kernel ends
// the FUSE connection only when the last of them is gone, so an unmount of
// the first alone would leave the daemon serving the others, waiting. Each
// is unmounted, or detached if busy; one this process may not unmount is
// left.
func (f *FS) unmountOthers() {
	for _, p := range OtherMountPoints(f.mnt) {
		err := unix.Unmount(p, 0)
		if err != nil {
			err = unix.Unmount(p, unix.MNT_DETACH)
		}
		if err != nil {
			f.log.Warn("a second mount point of the mount could not be unmounted", "mountpoint", p, "err", err)
			continue
		}
		f.log.Info("unmounted a second mount point of the mount", "mountpoint", p)
	}
}
