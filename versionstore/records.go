package versionstore

import (
	"encoding/json"
	"io/fs"
	"time"
)

// The index's records: what the values of its JSON buckets are on disk,
// and the only place they are encoded and decoded. They are private types
// of their own because the types the store hands out (HistoryEntry,
// JournalEntry, Checkpoint, SalvageReport, Writer, Owner) are the socket's
// wire types too, which openapi.json describes: renaming one of their
// fields, or adding one, must not change what the index holds. A change
// here is a change of the index's schema: it needs a new schemaVersion and
// an upgrade of older indexes (schema.go); TestRecordEncodingUnchanged
// pins the bytes and TestKeptIndex reads an index an earlier dshfs wrote.
//
// The private types the store works with (record below, its fingerprint,
// unsettled) are stored as they are: nothing outside the package sees them. A version
// is stored in its text form (b3:<64 hex digits>, "" for none), a mode as
// its number.

// record is the index entry of one path.
type record struct {
	Version  Version     `json:"version"` // zero: the path is known to be absent (a tombstone)
	FP       fingerprint `json:"fp"`
	Recorded int64       `json:"recorded_ns"` // wall clock when FP was taken, for the racy rule
	// HistFirst and HistNext bound the live history sequence numbers [first, next).
	HistFirst uint64 `json:"hist_first"`
	HistNext  uint64 `json:"hist_next"`
	// Perm is the permission bits the file last had, kept when it is
	// deleted: a restore that recreates it gives them back. Zero: unknown.
	Perm fs.FileMode `json:"perm,omitempty"`
}

// diskWriter is a Writer as stored.
type diskWriter struct {
	Kind  string `json:"kind"`
	Actor string `json:"actor,omitempty"`
	Pid   uint32 `json:"pid,omitempty"`
	Uid   uint32 `json:"uid,omitempty"`
	Comm  string `json:"comm,omitempty"`
}

// diskOwner is an Owner as stored.
type diskOwner struct {
	Uid  uint32      `json:"uid"`
	Gid  uint32      `json:"gid"`
	Perm fs.FileMode `json:"perm"`
}

// diskHistory is a HistoryEntry as stored: whether its bytes are kept is
// found when it is read, never stored.
type diskHistory struct {
	Version Version    `json:"version"`
	Size    int64      `json:"size"`
	Time    time.Time  `json:"time"`
	Writer  diskWriter `json:"writer"`
	Deleted bool       `json:"deleted,omitempty"`
	Owner   *diskOwner `json:"owner,omitempty"`
}

// diskJournal is a JournalEntry as stored.
type diskJournal struct {
	Seq         uint64     `json:"seq"`
	Path        string     `json:"path"`
	Prev        Version    `json:"prev"`
	PrevUnknown bool       `json:"prev_unknown,omitempty"`
	PrevOwner   *diskOwner `json:"prev_owner,omitempty"`
	Version     Version    `json:"version"`
	Size        int64      `json:"size,omitempty"`
	Time        time.Time  `json:"time"`
	Writer      diskWriter `json:"writer"`
	From        string     `json:"from,omitempty"`
	To          string     `json:"to,omitempty"`
}

// diskCheckpoint is a Checkpoint as stored.
type diskCheckpoint struct {
	Name  string    `json:"name"`
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
	Files int       `json:"files"`
	Auto  bool      `json:"auto,omitempty"`
}

// diskSalvage is a SalvageReport as stored.
type diskSalvage struct {
	At            time.Time      `json:"at"`
	From          string         `json:"from"`
	Copied        map[string]int `json:"copied"`
	Lost          int            `json:"pages_lost"`
	CompleteUntil time.Time      `json:"history_complete_until"`
	JournalSeq    uint64         `json:"journal_seq"`
	Unreadable    string         `json:"unreadable,omitempty"`
}

func toDiskWriter(w Writer) diskWriter {
	return diskWriter{Kind: string(w.Kind), Actor: w.Actor, Pid: w.Pid, Uid: w.Uid, Comm: w.Comm}
}

func (d diskWriter) writer() Writer {
	return Writer{Kind: WriterKind(d.Kind), Actor: d.Actor, Pid: d.Pid, Uid: d.Uid, Comm: d.Comm}
}

func toDiskOwner(o *Owner) *diskOwner {
	if o == nil {
		return nil
	}
	return &diskOwner{Uid: o.Uid, Gid: o.Gid, Perm: o.Perm}
}

func (d *diskOwner) owner() *Owner {
	if d == nil {
		return nil
	}
	return &Owner{Uid: d.Uid, Gid: d.Gid, Perm: d.Perm}
}

func encodeHistory(e HistoryEntry) ([]byte, error) {
	return encodeValue(diskHistory{Version: e.Version, Size: e.Size, Time: e.Time,
		Writer: toDiskWriter(e.Writer), Deleted: e.Deleted, Owner: toDiskOwner(e.Owner)})
}

func decodeHistory(v []byte) (HistoryEntry, error) {
	var d diskHistory
	err := decodeValue(v, &d)
	return HistoryEntry{Version: d.Version, Size: d.Size, Time: d.Time, Writer: d.Writer.writer(),
		Deleted: d.Deleted, Owner: d.Owner.owner()}, err
}

func encodeJournal(e JournalEntry) ([]byte, error) {
	return encodeValue(diskJournal{Seq: e.Seq, Path: e.Path, Prev: e.Prev, PrevUnknown: e.PrevUnknown,
		PrevOwner: toDiskOwner(e.PrevOwner), Version: e.Version, Size: e.Size, Time: e.Time,
		Writer: toDiskWriter(e.Writer), From: e.From, To: e.To})
}

func decodeJournal(v []byte) (JournalEntry, error) {
	var d diskJournal
	err := decodeValue(v, &d)
	return JournalEntry{Seq: d.Seq, Path: d.Path, Prev: d.Prev, PrevUnknown: d.PrevUnknown,
		PrevOwner: d.PrevOwner.owner(), Version: d.Version, Size: d.Size, Time: d.Time,
		Writer: d.Writer.writer(), From: d.From, To: d.To}, err
}

func encodeCheckpoint(cp Checkpoint) ([]byte, error) {
	return encodeValue(diskCheckpoint(cp))
}

func decodeCheckpoint(v []byte) (Checkpoint, error) {
	var d diskCheckpoint
	err := decodeValue(v, &d)
	return Checkpoint(d), err
}

func encodeSalvage(r SalvageReport) ([]byte, error) {
	return encodeValue(diskSalvage(r))
}

func decodeSalvage(v []byte) (SalvageReport, error) {
	var d diskSalvage
	err := decodeValue(v, &d)
	return SalvageReport(d), err
}

func encodeRecord(r record) ([]byte, error) { return encodeValue(r) }

func decodeRecord(v []byte) (record, error) {
	var r record
	err := decodeValue(v, &r)
	return r, err
}

func encodeUnsettled(u unsettled) ([]byte, error) { return encodeValue(u) }

func decodeUnsettled(v []byte) (unsettled, error) {
	var u unsettled
	err := decodeValue(v, &u)
	return u, err
}

// encodeValue and decodeValue leave the wrapping to their callers, which
// name the key.
func encodeValue(d any) ([]byte, error) { return json.Marshal(d) }

func decodeValue(v []byte, d any) error { return json.Unmarshal(v, d) }

// validValue reports whether v could be a value of a JSON bucket (salvage
// copies no other).
func validValue(v []byte) bool { return json.Valid(v) }
