package versionstore

import (
	"bytes"
	"fmt"
	"io/fs"
	"time"

	bolt "go.etcd.io/bbolt"
)

// WriterKind says who produced a version.
type WriterKind string

// The writer kinds of the design contract.
const (
	WriterTool     WriterKind = "tool"
	WriterMount    WriterKind = "mount"
	WriterExternal WriterKind = "external"
	// WriterBaseline names the content a file had when dshfs first saw it:
	// most often what was there before the mount. Entries of an earlier
	// dshfs call a first sighting "external".
	WriterBaseline WriterKind = "baseline"
)

// Writer identifies who wrote a version: a tool actor, a process writing
// through the mount, or someone writing into the backing directory directly.
type Writer struct {
	Kind  WriterKind `json:"kind"`
	Actor string     `json:"actor,omitempty"`
	Pid   uint32     `json:"pid,omitempty"`
	Uid   uint32     `json:"uid,omitempty"`
	Comm  string     `json:"comm,omitempty"`
}

// ToolWriter is the writer identity of a tool call made by actor.
func ToolWriter(actor string) Writer { return Writer{Kind: WriterTool, Actor: actor} }

// External is the writer of changes made behind the store's back.
var External = Writer{Kind: WriterExternal}

// Baseline is the writer of a file's first version, found already there.
var Baseline = Writer{Kind: WriterBaseline}

// Owner is who owned a file while it had a version, and its permission
// bits: a restore or rewind gives the bytes back to them, never to whoever
// owns the path now.
type Owner struct {
	Uid  uint32      `json:"uid"`
	Gid  uint32      `json:"gid"`
	Perm fs.FileMode `json:"perm"`
}

// HistoryEntry is one version of a path. A zero Version records a deletion.
// It is what the store hands out (a wire type of the socket too); the
// index stores a diskHistory (records.go).
type HistoryEntry struct {
	Version Version   `json:"version"`
	Size    int64     `json:"size"`
	Time    time.Time `json:"time"`
	Writer  Writer    `json:"writer"`
	Deleted bool      `json:"deleted,omitempty"`
	// Owner is the file's owner and permission bits with this version, the
	// latest seen while it had it; nil: unknown (an entry of an earlier
	// dshfs, or a deletion).
	Owner *Owner `json:"owner,omitempty"`
	// Kept says the version's bytes are in the object store, and NotKept
	// why not (both set when history is read, never stored).
	Kept    bool   `json:"kept,omitempty"`
	NotKept string `json:"not_kept,omitempty"`
}

func getRecord(tx *bolt.Tx, key string) (record, bool, error) {
	b := tx.Bucket(bucketFiles).Get([]byte(key))
	if b == nil {
		return record{}, false, nil
	}
	r, err := decodeRecord(b)
	if err != nil {
		return r, false, fmt.Errorf("decode index entry %q: %w", key, err)
	}
	return r, true, nil
}

func putRecord(tx *bolt.Tx, key string, r record) error {
	b, err := encodeRecord(r)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketFiles).Put([]byte(key), b)
}

// appendHistory adds e to r's history, dropping the oldest entries beyond limit.
func appendHistory(tx *bolt.Tx, key string, r *record, e HistoryEntry, limit int) error {
	b, err := encodeHistory(e)
	if err != nil {
		return err
	}
	h := tx.Bucket(bucketHistory)
	if err := h.Put(historyKey(key, r.HistNext), b); err != nil {
		return err
	}
	r.HistNext++
	for r.HistNext-r.HistFirst > uint64(limit) {
		if err := h.Delete(historyKey(key, r.HistFirst)); err != nil {
			return err
		}
		r.HistFirst++
	}
	return nil
}

// setNewestOwner makes o the owner of r's newest history entry: a chmod or
// chown of a file keeps its version, and its history must say who owns
// those bytes now.
func setNewestOwner(tx *bolt.Tx, key string, r record, o *Owner) error {
	if r.HistNext == r.HistFirst {
		return nil
	}
	h := tx.Bucket(bucketHistory)
	k := historyKey(key, r.HistNext-1)
	v := h.Get(k)
	if v == nil {
		return nil
	}
	e, err := decodeHistory(v)
	if err != nil {
		return fmt.Errorf("decode history of %q: %w", key, err)
	}
	if e.Deleted || e.Owner != nil && *e.Owner == *o {
		return nil
	}
	e.Owner = o
	b, err := encodeHistory(e)
	if err != nil {
		return err
	}
	return h.Put(k, b)
}

// readHistory returns the history of key, newest first.
func readHistory(tx *bolt.Tx, key string) ([]HistoryEntry, error) {
	prefix := append([]byte(key), 0)
	c := tx.Bucket(bucketHistory).Cursor()
	var out []HistoryEntry
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Next() {
		e, err := decodeHistory(v)
		if err != nil {
			return nil, fmt.Errorf("decode history of %q: %w", key, err)
		}
		out = append(out, e)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// moveEntry moves one path's record and history to another key, replacing
// whatever the destination had (its history included).
func moveEntry(tx *bolt.Tx, from, to string) error {
	r, found, err := getRecord(tx, from)
	if err != nil || !found {
		return err
	}
	if err := deleteEntry(tx, to); err != nil {
		return err
	}
	h := tx.Bucket(bucketHistory)
	for seq := r.HistFirst; seq < r.HistNext; seq++ {
		v := h.Get(historyKey(from, seq))
		if v == nil {
			continue
		}
		if err := h.Put(historyKey(to, seq), append([]byte(nil), v...)); err != nil {
			return err
		}
		if err := h.Delete(historyKey(from, seq)); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bucketFiles).Delete([]byte(from)); err != nil {
		return err
	}
	return putRecord(tx, to, r)
}

// deleteEntry removes a path's record and history.
func deleteEntry(tx *bolt.Tx, key string) error {
	r, found, err := getRecord(tx, key)
	if err != nil || !found {
		return err
	}
	h := tx.Bucket(bucketHistory)
	for seq := r.HistFirst; seq < r.HistNext; seq++ {
		if err := h.Delete(historyKey(key, seq)); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketFiles).Delete([]byte(key))
}
