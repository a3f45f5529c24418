package versionstore

import (
	"io/fs"
	"time"
)

// fingerprint is what a stat says about a file's identity and last change.
// Equal fingerprints on a non-racy entry mean the bytes were not touched;
// anything else means "rehash".
type fingerprint struct {
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
	// Perm is the file's permission bits, for a file recreated later (a
	// chmod changes the ctime anyway, so it adds no false changes).
	Perm fs.FileMode `json:"perm,omitempty"`
	// Uid and Gid are the file's owner, when Owned (a stat that says, of a
	// fingerprint recorded since dshfs keeps them): who the bytes of the
	// version belong to. A chown changes the ctime too.
	Uid   uint32 `json:"uid,omitempty"`
	Gid   uint32 `json:"gid,omitempty"`
	Owned bool   `json:"owned,omitempty"`
}

// racyWindow is how close to the moment of recording a timestamp may be
// before the fingerprint stops proving anything: a write landing in the same
// timestamp tick as the stat would leave mtime and ctime unchanged. Git uses
// the same idea ("racy git"). Two seconds covers the coarsest timestamps of
// the filesystems dshfs may sit on (FAT, HFS+ and some network filesystems).
const racyWindow = 2 * time.Second

func fingerprintOf(fi fs.FileInfo) fingerprint {
	ino, ctime := inodeAndCtime(fi)
	fp := fingerprint{Ino: ino, Size: fi.Size(), MtimeNs: fi.ModTime().UnixNano(), CtimeNs: ctime, Perm: fi.Mode().Perm()}
	if uid, gid, ok := ownerOf(fi); ok {
		fp.Uid, fp.Gid, fp.Owned = uint32(uid), uint32(gid), true
	}
	return fp
}

// owner is the owner and permission bits fp saw; nil if it saw none.
func (fp fingerprint) owner() *Owner {
	if !fp.Owned {
		return nil
	}
	return &Owner{Uid: fp.Uid, Gid: fp.Gid, Perm: fp.Perm}
}

// racy reports whether fp, taken at recordedNs, is too close to its own
// timestamps to vouch for the content.
func (fp fingerprint) racy(recordedNs int64) bool {
	limit := recordedNs - int64(racyWindow)
	return fp.MtimeNs >= limit || fp.CtimeNs >= limit
}
