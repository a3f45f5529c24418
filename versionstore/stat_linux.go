package versionstore

import (
	"io/fs"
	"syscall"
)

func inodeAndCtime(fi fs.FileInfo) (uint64, int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return st.Ino, st.Ctim.Nano()
}

func ownerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// oNoatime keeps the store's own reads (hashing, snapshots) from touching
// files' access times, which users and tools see.
const oNoatime = syscall.O_NOATIME
