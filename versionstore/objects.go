package versionstore

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"
)

// The object store keeps the bytes of versions, keyed by the version itself,
// so every version of every file can be shown, diffed and restored. Objects
// are zstd-compressed. Small ones (most source files) live in the index's
// "objects" bucket and are written in the same transaction as the history
// entry that names them; large ones are files in the state directory's
// objects/ directory, written to a temporary name and renamed into place.
// Every read hashes the bytes again: a damaged object is an error, never
// returned.
//
// An object's value in the bucket is a header —
//
//	format  1 byte: 'z' zstd data follows, 'f' the data is in objects/<hex>
//	stored  8 bytes: unix seconds when the object was stored (big endian)
//	size    8 bytes: the uncompressed size
//	packed  8 bytes: the compressed size (the bytes it occupies)
//
// — followed by the data for format 'z'. Objects are durable with the
// commit that names them (a file's bytes are fsynced before it).

const (
	objInline   = 'z'
	objFile     = 'f'
	objHeader   = 1 + 8 + 8 + 8
	inlineLimit = 1 << 20 // compressed objects up to this size stay in the index
)

// DefaultCaptureMaxBytes is the largest file whose bytes are kept.
const DefaultCaptureMaxBytes = 64 << 20

// ErrCorrupt is wrapped by errors for stored bytes that no longer hash to
// their version.
var ErrCorrupt = errors.New("stored bytes are corrupt")

// ErrNotKept is wrapped by errors for versions whose bytes were never kept
// (too large) or have been collected.
var ErrNotKept = errors.New("bytes not kept")

// objectStore compresses and places objects. The zstd encoder and decoder
// are safe for concurrent use through EncodeAll and DecodeAll.
type objectStore struct {
	dir     string // objects/ beside the index
	maxKeep int64  // negative: capture is off (stored objects stay readable)
	enc     *zstd.Encoder
	dec     *zstd.Decoder

	// files orders object files against collection: a commit holds it
	// shared from writing its files to committing the entries naming them,
	// collection exclusively from its transaction to removing the files it
	// dropped. Otherwise a commit could find a file about to be removed,
	// skip writing it, and name it.
	files sync.RWMutex
}

func newObjectStore(dir string, maxKeep int64) (*objectStore, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	// DecodeAll never grows past the capacity it is given (the recorded
	// size): a damaged header cannot make it allocate more.
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, err
	}
	return &objectStore{dir: dir, maxKeep: maxKeep, enc: enc, dec: dec}, nil
}

// capturing reports whether bytes are kept at all.
func (o *objectStore) capturing() bool { return o.maxKeep >= 0 }

// keeps reports whether the bytes of a file of size n are kept.
func (o *objectStore) keeps(n int64) bool { return n <= o.maxKeep }

// packed is an object ready to be put: its bucket value, and for a large
// one the compressed data for its file.
type packed struct {
	version Version
	value   []byte
	file    []byte
}

// pack compresses data, whose version is v.
func (o *objectStore) pack(v Version, data []byte, now time.Time) packed {
	z := o.enc.EncodeAll(data, make([]byte, objHeader, objHeader+len(data)/2+64))
	hdr := func(b []byte, format byte, n int) {
		b[0] = format
		binary.BigEndian.PutUint64(b[1:], uint64(now.Unix()))
		binary.BigEndian.PutUint64(b[9:], uint64(len(data)))
		binary.BigEndian.PutUint64(b[17:], uint64(n))
	}
	if n := len(z) - objHeader; n <= inlineLimit {
		hdr(z, objInline, n)
		return packed{version: v, value: z}
	}
	value := make([]byte, objHeader)
	hdr(value, objFile, len(z)-objHeader)
	return packed{version: v, value: value, file: z[objHeader:]}
}

func (o *objectStore) path(v Version) string {
	h := hex.EncodeToString(v[:])
	return filepath.Join(o.dir, h[:2], h[2:])
}

// writeFile places a large object's data before the transaction that
// names it commits. It is called only for objects the index does not hold,
// so a file already there is a leftover (of a crash, or of a collection) and
// is replaced: written in full and synced before it takes the name.
func (o *objectStore) writeFile(p packed) error {
	dst := o.path(p.version)
	if err := o.mkdirSynced(filepath.Dir(dst)); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(dst), tempName(filepath.Base(dst)))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(p.file)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
		o.traced("rename", dst, err)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return o.syncDir(filepath.Dir(dst))
}

// mkdirSynced makes dir and its missing parents, syncing the parent of each
// one made: the index must never name a file whose directory a power cut
// can take away.
func (o *objectStore) mkdirSynced(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := o.mkdirSynced(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err // one a concurrent commit just made is synced too
	}
	return o.syncDir(parent)
}

// syncDir makes the entries of dir durable.
func (o *objectStore) syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	o.traced("sync", dir, err)
	return err
}

// traced reports op on name, relative to the state directory, to traceSync.
func (o *objectStore) traced(op, name string, err error) {
	if traceSync == nil {
		return
	}
	if rel, rerr := filepath.Rel(filepath.Dir(o.dir), name); rerr == nil {
		traced(op, filepath.ToSlash(filepath.Join("state", rel)), err)
	}
}

// putObject stores p in tx, replacing an entry whose file is gone; it
// reports the bytes the object adds to those kept in files of their own
// (what it adds to the index, the index's size tells).
func putObject(tx *bolt.Tx, p packed) (int64, error) {
	b := tx.Bucket(bucketObjects)
	if err := tx.Bucket(bucketUnkept).Delete(p.version[:]); err != nil {
		return 0, err
	}
	if old := b.Get(p.version[:]); old != nil {
		if p.file == nil && old[0] == objFile {
			// The new copy is inline; the old entry named a file.
			return -packedSize(old), b.Put(p.version[:], p.value)
		}
		return 0, nil
	}
	if p.file == nil {
		return 0, b.Put(p.version[:], p.value)
	}
	return packedSize(p.value), b.Put(p.version[:], p.value)
}

// present reports whether the bytes of v are stored and, for an object kept
// in a file, that the file is there: an index synced before a crash can
// name a file a collection removed.
func (o *objectStore) present(tx *bolt.Tx, v Version) bool {
	value := tx.Bucket(bucketObjects).Get(v[:])
	if value == nil {
		return false
	}
	if value[0] == objFile {
		_, err := os.Stat(o.path(v))
		return err == nil
	}
	return true
}

// hasObject reports whether the bytes of v are stored.
func hasObject(tx *bolt.Tx, v Version) bool {
	return tx.Bucket(bucketObjects).Get(v[:]) != nil
}

func packedSize(value []byte) int64 {
	if len(value) < objHeader {
		return int64(len(value))
	}
	return int64(binary.BigEndian.Uint64(value[17:]))
}

func storedAt(value []byte) time.Time {
	if len(value) < objHeader {
		return time.Time{}
	}
	return time.Unix(int64(binary.BigEndian.Uint64(value[1:])), 0)
}

// load returns the verified bytes of v.
func (o *objectStore) load(tx *bolt.Tx, v Version) ([]byte, error) {
	value := tx.Bucket(bucketObjects).Get(v[:])
	if value == nil {
		return nil, fmt.Errorf("%s: %w", v, ErrNotKept)
	}
	if len(value) < objHeader {
		return nil, fmt.Errorf("%s: %w (short header)", v, ErrCorrupt)
	}
	size := binary.BigEndian.Uint64(value[9:])
	var z []byte
	switch value[0] {
	case objInline:
		z = value[objHeader:]
	case objFile:
		var err error
		if z, err = readObjectFile(o.path(v)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				// Collected since the entry was read, or lost: gone, not wrong.
				return nil, fmt.Errorf("%s: %w (its file is gone)", v, ErrNotKept)
			}
			return nil, fmt.Errorf("%s: %w", v, err)
		}
	default:
		return nil, fmt.Errorf("%s: %w (unknown format %q)", v, ErrCorrupt, value[0])
	}
	if size > uint64(max(o.maxKeep, DefaultCaptureMaxBytes))*4 {
		return nil, fmt.Errorf("%s: %w (size %d)", v, ErrCorrupt, size)
	}
	data, err := o.dec.DecodeAll(z, make([]byte, 0, size))
	if err != nil {
		return nil, fmt.Errorf("%s: %w (%v)", v, ErrCorrupt, err)
	}
	if uint64(len(data)) != size || Sum(data) != v {
		return nil, fmt.Errorf("%s: %w (the bytes hash to %s)", v, ErrCorrupt, Sum(data))
	}
	return data, nil
}

// Object returns the bytes of version v, verified against v. ErrNotKept
// says they were never kept or have been collected; ErrCorrupt that what is
// stored no longer hashes to v.
func (s *Store) Object(v Version) ([]byte, error) {
	s.flushPending()
	s.objects.files.RLock() // a collection does not remove its file meanwhile
	defer s.objects.files.RUnlock()
	var data []byte
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		data, err = s.objects.load(tx, v)
		return err
	})
	return data, err
}

// HasObject reports whether the bytes of v are kept.
func (s *Store) HasObject(v Version) (ok bool, err error) {
	s.flushPending()
	err = s.db.View(func(tx *bolt.Tx) error {
		ok = hasObject(tx, v)
		return nil
	})
	return ok, err
}

// fileBytes sums the space the objects kept in files of their own occupy
// (the others are in the index's pages).
func fileBytes(tx *bolt.Tx) int64 {
	var n int64
	tx.Bucket(bucketObjects).ForEach(func(_, v []byte) error {
		if len(v) > 0 && v[0] == objFile {
			n += packedSize(v)
		}
		return nil
	})
	return n
}

// ObjectFrame returns the stored bytes of v as they are kept: one zstd
// frame (the encoder at its fastest level) and the size it decompresses to.
// It does not decompress them, so it does not check them against v: the
// reader of the frame must (a replica checks every object it reads back).
// Nor does it commit the mount's queued versions first: it is for versions
// a committed journal entry names, whose bytes were committed with it.
func (s *Store) ObjectFrame(v Version) (z []byte, size int64, err error) {
	s.objects.files.RLock()
	defer s.objects.files.RUnlock()
	err = s.db.View(func(tx *bolt.Tx) error {
		z, size, err = s.objects.frame(tx, v)
		return err
	})
	return z, size, err
}

// frame is the compressed bytes of v, copied out of the transaction.
func (o *objectStore) frame(tx *bolt.Tx, v Version) ([]byte, int64, error) {
	value := tx.Bucket(bucketObjects).Get(v[:])
	if value == nil {
		return nil, 0, fmt.Errorf("%s: %w", v, ErrNotKept)
	}
	if len(value) < objHeader {
		return nil, 0, fmt.Errorf("%s: %w (short header)", v, ErrCorrupt)
	}
	size := int64(binary.BigEndian.Uint64(value[9:]))
	switch value[0] {
	case objInline:
		return append([]byte(nil), value[objHeader:]...), size, nil
	case objFile:
		z, err := readObjectFile(o.path(v))
		if errors.Is(err, os.ErrNotExist) {
			return nil, 0, fmt.Errorf("%s: %w (its file is gone)", v, ErrNotKept)
		}
		return z, size, err
	}
	return nil, 0, fmt.Errorf("%s: %w (unknown format %q)", v, ErrCorrupt, value[0])
}

// packAhead compresses the bytes c keeps now, in the goroutine that queues
// c: the batch's commit, one goroutine for every writer's versions, then
// only writes them. Bytes the store holds already are left for the commit
// to drop (it decides under the collection's lock whether they still are).
func (s *Store) packAhead(c *change) {
	if c.data == nil {
		return
	}
	held := false
	err := s.db.View(func(tx *bolt.Tx) error {
		held = s.objects.present(tx, c.version)
		return nil
	})
	if held && err == nil {
		return
	}
	// An index that cannot be read now: packing costs time, not bytes.
	p := s.objects.pack(c.version, c.data, s.now())
	c.packed, c.data = &p, nil
}

// carries reports whether c brings bytes to keep.
func (c *change) carries() bool { return c.data != nil || c.packed != nil }

// keptBytes is how much memory the bytes c keeps take while queued.
func (c *change) keptBytes() int64 {
	if c.packed != nil {
		return int64(len(c.packed.value) + len(c.packed.file))
	}
	return int64(len(c.data))
}
