package versionstore

import (
	"encoding/binary"
	"io"
	"io/fs"

	"github.com/zeebo/blake3"
)

// Unhashed files. A file larger than the hashing limit — the capture limit,
// and never less than DefaultCaptureMaxBytes — is versioned by its stat,
// not by its bytes: hashing it would read all of them, holes included, and
// a 4 KiB write at offset 16 TiB makes a file whose every version would
// cost 16 TiB of reading. Its version is BLAKE3's key derivation over the
// fingerprint's inode, size and times (unhashedVersion), in a context of
// its own so that it is never the hash of any bytes; its bytes are never
// kept (a log says so, NotKeptUnhashed), the read tool streams them without
// hashing, and the write and edit tools refuse the file (ReasonUnhashed):
// they could neither keep what they replace nor check what they change.

// unhashedContext is the BLAKE3 key-derivation context of unhashed versions.
const unhashedContext = "dshfs 2026-12 unhashed version: the stat of a file too large to hash"

// hashes reports whether a file of size bytes is versioned by its bytes.
func (o *objectStore) hashes(size int64) bool { return size <= o.hashLimit() }

// hashLimit is the size past which files are not hashed.
func (o *objectStore) hashLimit() int64 { return max(o.maxKeep, DefaultCaptureMaxBytes) }

// unhashedVersion is the version of an unhashed file whose stat says fp.
func unhashedVersion(fp fingerprint) Version {
	var material [32]byte
	binary.LittleEndian.PutUint64(material[0:], fp.Ino)
	binary.LittleEndian.PutUint64(material[8:], uint64(fp.Size))
	binary.LittleEndian.PutUint64(material[16:], uint64(fp.MtimeNs))
	binary.LittleEndian.PutUint64(material[24:], uint64(fp.CtimeNs))
	var v Version
	blake3.DeriveKey(unhashedContext, material[:], v[:])
	return v
}

// unhashedFailure refuses verb on t, a file of size bytes past the hashing
// limit.
func (s *Store) unhashedFailure(verb string, t Target, size int64) *Error {
	e := fail(ReasonUnhashed, verb, t.Display)
	e.Size, e.Limit = size, s.objects.hashLimit()
	return e
}

// versionOf is the version of the open file f, whose stat is fi: the hash
// of its bytes, or its unhashed version.
func (s *Store) versionOf(f io.Reader, fi fs.FileInfo) (Version, error) {
	if !s.objects.hashes(fi.Size()) {
		return unhashedVersion(fingerprintOf(fi)), nil
	}
	v, _, err := HashReader(f)
	return v, err
}
