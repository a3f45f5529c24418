// Package remote owns a workspace's history in S3-compatible object
// storage: the replica the daemon ships in the background (every kept
// object, every journal entry, the checkpoints), and reading it back on a
// machine that has nothing else. The layout is docs/remote-format.md:
//
//	head.json                      the writer and the newest segment (conditional writes)
//	journal/<n 12 digits>-<writer>.json   immutable segments, each naming the one before
//	packs/<blake3 hex>             small objects, zstd frames one after another
//	objects/<2 hex>/<62 hex>       a large object, one zstd frame, keyed by its version
//	trees/<blake3 hex>             the workspace's shape (directories, symlinks, modes), a zstd frame of JSON
//
// It reads the store through its exported methods only and writes nothing
// into the workspace; what a person reads about it is worded by cmd/dshfs.
package remote

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"
)

// formatName names the layout in every head and segment.
const formatName = "dshfs-history/1"

const headKey = "head.json"

// packLimit is the largest compressed object kept in a pack; larger ones
// are objects of their own. packMax bounds a pack.
const (
	packLimit = 1 << 20
	packMax   = 32 << 20
)

// ErrTaken is wrapped by the error of a replicator whose prefix another
// writer replicates to.
var ErrTaken = errors.New("another dshfs replicates to it")

// head is the one mutable object: who writes the prefix, and its newest
// segment. It is only ever written conditionally.
type head struct {
	Format  string    `json:"format"`
	Writer  string    `json:"writer"`
	Segment string    `json:"segment,omitempty"` // the newest segment's key, under the prefix
	N       uint64    `json:"n"`                 // its number
	Seq     uint64    `json:"seq"`               // the last journal entry shipped
	Time    time.Time `json:"time"`
}

// segment is one immutable step of the history: journal entries after the
// previous segment's, the checkpoints as they were, and where the bytes of
// the versions it names first are.
type segment struct {
	Format      string                             `json:"format"`
	N           uint64                             `json:"n"`
	Prev        string                             `json:"prev,omitempty"`
	Writer      string                             `json:"writer"`
	Entries     []versionstore.JournalEntry        `json:"entries"`
	Checkpoints []versionstore.Checkpoint          `json:"checkpoints"`
	Objects     map[versionstore.Version]objectRef `json:"objects,omitempty"`
	// Tree, if set, describes the workspace at journal entry Tree.Seq.
	Tree *treeRef `json:"tree,omitempty"`
}

// treeRef is where a tree description is: one zstd frame of JSON whose
// BLAKE3 is the key's name.
type treeRef struct {
	Key  string `json:"key"`
	Seq  uint64 `json:"seq"`
	Len  int64  `json:"len"`
	Size int64  `json:"size"` // uncompressed
}

// tree is the workspace's shape at journal entry Seq: every directory,
// symlink and file, the files with their version.
type tree struct {
	Format  string                   `json:"format"`
	Seq     uint64                   `json:"seq"`
	Time    time.Time                `json:"time"`
	Entries []versionstore.TreeEntry `json:"entries"`
	body    []byte                   // Entries encoded, to compare with the last shipped
}

// objectRef is where an object's compressed bytes are: a whole object, or
// a range of a pack.
type objectRef struct {
	Key  string `json:"key"`
	Off  int64  `json:"off,omitempty"`
	Len  int64  `json:"len"`
	Size int64  `json:"size"` // uncompressed
}

func segmentKey(n uint64, writer string) string {
	return fmt.Sprintf("journal/%012d-%s.json", n, writer)
}

func objectKey(v versionstore.Version) string {
	h := hex.EncodeToString(v[:])
	return "objects/" + h[:2] + "/" + h[2:]
}

func treeKey(data []byte) string {
	sum := blake3.Sum256(data)
	return "trees/" + hex.EncodeToString(sum[:])
}

func packKey(data []byte) string {
	sum := blake3.Sum256(data)
	return "packs/" + hex.EncodeToString(sum[:])
}

// codec compresses objects the same way every time: a segment rebuilt
// after a crash names the same packs.
type codec struct {
	enc *zstd.Encoder
	dec *zstd.Decoder // DecodeAll stops at the capacity it is given
}

func newCodec() (*codec, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, err
	}
	return &codec{enc: enc, dec: dec}, nil
}

// open decompresses z, which must be the bytes of version v of size n.
func (c *codec) open(v versionstore.Version, z []byte, n int64) ([]byte, error) {
	if n < 0 || n > maxObjectSize {
		return nil, fmt.Errorf("%s: %w (size %d)", v, versionstore.ErrCorrupt, n)
	}
	data, err := c.decodeExactly(z, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (%v)", v, versionstore.ErrCorrupt, err)
	}
	if versionstore.Sum(data) != v {
		return nil, fmt.Errorf("%s: %w (the bytes hash to %s)", v, versionstore.ErrCorrupt, versionstore.Sum(data))
	}
	return data, nil
}

const (
	// The largest object and tree a replica is read with; a size over
	// these in a segment or a tree reference is damage.
	maxObjectSize = 1 << 34
	maxTreeSize   = 1 << 32
	// maxRatio is the most a zstd frame can expand: a block of at most
	// 128 KiB from 4 bytes (a 3-byte header and the byte an RLE block
	// repeats).
	maxRatio = 128 << 10 / 4
)

// decodeExactly decompresses z, which must come to n bytes. n comes from
// the bucket, and the buffer is allocated n ahead: a size z cannot expand
// to is damage found before anything is allocated, so the buffer is at
// most 32,768 times the bytes the bucket really holds. Decompression
// stops at n.
func (c *codec) decodeExactly(z []byte, n int64) ([]byte, error) {
	if n > int64(len(z))*maxRatio {
		return nil, fmt.Errorf("%d bytes cannot decompress to %d", len(z), n)
	}
	data, err := c.dec.DecodeAll(z, make([]byte, 0, n))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != n {
		return nil, fmt.Errorf("decompressed to %d bytes, not %d", len(data), n)
	}
	return data, nil
}

// in is ref's bytes in blob; false if they are not all there (a segment
// cut short, damaged or tampered with: an offset or length that is
// negative or runs past the end).
func (ref objectRef) in(blob []byte) ([]byte, bool) {
	if ref.Off < 0 || ref.Len < 0 || ref.Off > int64(len(blob)) || ref.Len > int64(len(blob))-ref.Off {
		return nil, false
	}
	return blob[ref.Off : ref.Off+ref.Len], true
}
