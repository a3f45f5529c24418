package versionstore

import (
	bolt "go.etcd.io/bbolt"
)

// Why a version's bytes are not kept, for the people reading a log. The
// index remembers the two reasons it cannot tell afterwards: a collection
// dropped the bytes, or the retention budget was full when a walk of the
// workspace found the file.
// (the unkept bucket, buckets.go).

// The reasons NotKept gives.
const (
	NotKeptTooLarge  = "larger than the capture limit (dshfs mount --keep-max-bytes)"
	NotKeptUnhashed  = "too large to hash: the version is of the file's size, times and inode, not of its bytes"
	NotKeptNoCapture = "this mount keeps no bytes (dshfs mount --keep-max-bytes -1)"
	NotKeptCollected = "dropped by gc (past --retain-age, or over --retain-bytes)"
	NotKeptBudget    = "the retention budget (--retain-bytes) was full when dshfs indexed the file"
	NotKeptUnseen    = "dshfs never read these bytes: they were replaced behind its back before it looked"
)

// noteUnkept remembers why v's bytes are not kept.
func noteUnkept(tx *bolt.Tx, v Version, reason byte) error {
	return tx.Bucket(bucketUnkept).Put(v[:], []byte{reason})
}

// notKept says why the bytes of v, a version of size bytes, are not kept:
// "" if they are (or v is no version).
func (s *Store) notKept(tx *bolt.Tx, v Version, size int64) string {
	if v.IsZero() || hasObject(tx, v) {
		return ""
	}
	switch {
	case !s.objects.hashes(size):
		return NotKeptUnhashed
	case !s.objects.capturing():
		return NotKeptNoCapture
	case !s.objects.keeps(size):
		return NotKeptTooLarge
	}
	switch r := tx.Bucket(bucketUnkept).Get(v[:]); {
	case len(r) == 1 && r[0] == unkeptCollected:
		return NotKeptCollected
	case len(r) == 1 && r[0] == unkeptBudget:
		return NotKeptBudget
	}
	return NotKeptUnseen
}
