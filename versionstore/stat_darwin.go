package versionstore

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// The stat of a file is a *syscall.Stat_t from the os package, or a
// *unix.Stat_t from fstatat in a key's directory (keydir.go).

func inodeAndCtime(fi fs.FileInfo) (uint64, int64) {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return st.Ino, st.Ctimespec.Nano()
	case *unix.Stat_t:
		return st.Ino, st.Ctim.Nano()
	}
	return 0, 0
}

func ownerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	switch st := fi.Sys().(type) {
	case *syscall.Stat_t:
		return int(st.Uid), int(st.Gid), true
	case *unix.Stat_t:
		return int(st.Uid), int(st.Gid), true
	}
	return 0, 0, false
}

const oNoatime = 0
