package fusefs

// unmountOthers: macOS has no bind mounts, so a mount has one mount point.
func (f *FS) unmountOthers() {}
