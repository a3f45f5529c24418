package fusefs

// OtherMountPoints: macOS has no bind mounts, so a mount has one mount
// point.
func OtherMountPoints(mnt string) []string { return nil }

func (f *FS) unmountOthers() {}
