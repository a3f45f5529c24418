package versionstore

import "io/fs"

// probeFineCtime: macOS's filesystems have no multigrain timestamps, so a
// fingerprint close to its own recording stays racy there.
func probeFineCtime(dirfd int) (dev uint64, fine bool) { return 0, false }

func deviceOf(fi fs.FileInfo) (uint64, bool) { return 0, false }
