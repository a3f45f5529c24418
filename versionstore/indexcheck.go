package versionstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt trusts its file: a damaged page makes it panic outside any recover
// (in a goroutine of its own, or on a fault in its memory map), recurse
// forever down a branch page that points back up, or allocate what a torn
// count says. So before bbolt opens an index that may be damaged, this file
// reads it with plain reads and checks what bbolt would follow: the meta
// pages, every page reachable from the root (in bounds, of the right type,
// reached once), the freelist. The walk reads each page once, keeps one bit
// per page and descends at most maxIndexDepth levels: it always ends.
//
// The layout is bbolt's (go.etcd.io/bbolt/internal/common): a 16-byte page
// header (id u64, flags u16, count u16, overflow u32), 16-byte elements,
// meta fields after the header, an InBucket header (root u64, sequence u64)
// before an inline bucket's page.

const (
	pageHeaderSize  = 16
	elementSize     = 16
	branchPageFlag  = 0x01
	leafPageFlag    = 0x02
	metaPageFlag    = 0x04
	freelistFlag    = 0x10
	bucketLeafFlag  = 0x01
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	noFreelist      = ^uint64(0)
	maxIndexDepth   = 64
	bucketHeaderLen = 16
)

// rawMeta is the meta page bbolt would use.
type rawMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) exist
	txid     uint64
}

// rawIndex reads pages of a bbolt file without bbolt.
type rawIndex struct {
	f    io.ReaderAt
	size int64
	meta rawMeta
	// older is the other meta page's commit, if it is valid too: a
	// salvage falls back on it (salvage.go).
	older    rawMeta
	hasOlder bool
	seen     []uint64 // one bit per page reached
	// readErr is a meta page's read error other than the file's end: with
	// no valid meta, the disk failed, not necessarily the index.
	readErr error
}

func openRawIndex(f io.ReaderAt, size int64) (*rawIndex, error) {
	r := &rawIndex{f: f, size: size}
	m0, ok0 := r.readMeta(0, 0)
	ps := []int64{4096, int64(os.Getpagesize()), 8192, 16384, 65536}
	if ok0 {
		ps = []int64{int64(m0.pageSize)}
	}
	var m1 rawMeta
	ok1 := false
	for _, p := range ps {
		if m1, ok1 = r.readMeta(p, p); ok1 {
			break
		}
	}
	switch {
	case ok0 && (!ok1 || m0.txid >= m1.txid):
		r.meta, r.older, r.hasOlder = m0, m1, ok1
	case ok1:
		r.meta, r.older, r.hasOlder = m1, m0, ok0
	case r.readErr != nil:
		return nil, fmt.Errorf("read meta page: %w", r.readErr)
	default:
		return nil, errors.New("no valid meta page")
	}
	if err := r.use(r.meta); err != nil {
		return nil, err
	}
	return r, nil
}

// use makes m the meta pages are read by, once its bounds are checked.
func (r *rawIndex) use(m rawMeta) error {
	ps := int64(m.pageSize)
	if ps < 1024 || ps > 1<<20 || ps&(ps-1) != 0 {
		return fmt.Errorf("page size %d", ps)
	}
	if m.pgid < 2 || m.pgid > uint64(r.size/ps) {
		return fmt.Errorf("meta: %d pages, the file holds %d", m.pgid, r.size/ps)
	}
	r.meta, r.seen = m, make([]uint64, (m.pgid+63)/64)
	return nil
}

// readMeta reads the meta at off, of a page of size ps (0: unknown yet).
func (r *rawIndex) readMeta(off, ps int64) (rawMeta, bool) {
	var buf [pageHeaderSize + 64]byte
	if _, err := r.f.ReadAt(buf[:], off); err != nil {
		if !errors.Is(err, io.EOF) {
			r.readErr = err
		}
		return rawMeta{}, false
	}
	le := binary.LittleEndian
	m := buf[pageHeaderSize:]
	h := fnv.New64a()
	h.Write(m[:56])
	if le.Uint16(buf[8:]) != metaPageFlag || le.Uint32(m[0:]) != boltMagic || le.Uint32(m[4:]) != boltVersion || le.Uint64(m[56:]) != h.Sum64() {
		return rawMeta{}, false
	}
	meta := rawMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
	if ps != 0 && int64(meta.pageSize) != ps {
		return rawMeta{}, false
	}
	return meta, true
}

// page reads page id and its overflow pages, checking its header.
func (r *rawIndex) page(id uint64) ([]byte, error) {
	ps := uint64(r.meta.pageSize)
	if id < 2 || id >= r.meta.pgid {
		return nil, fmt.Errorf("page %d: out of bounds (%d pages)", id, r.meta.pgid)
	}
	var hdr [pageHeaderSize]byte
	if _, err := r.f.ReadAt(hdr[:], int64(id*ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	le := binary.LittleEndian
	if got := le.Uint64(hdr[0:]); got != id {
		return nil, fmt.Errorf("page %d: header says page %d", id, got)
	}
	n := uint64(le.Uint32(hdr[12:])) + 1
	if n > r.meta.pgid-id {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the end", id, n-1)
	}
	buf := make([]byte, n*ps)
	if _, err := r.f.ReadAt(buf, int64(id*ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return buf, nil
}

// reach marks page id and its overflow pages reached, failing if one was.
func (r *rawIndex) reach(id, n uint64) error {
	for p := id; p < id+n; p++ {
		if r.seen[p/64]&(1<<(p%64)) != 0 {
			return fmt.Errorf("page %d: reached twice", p)
		}
		r.seen[p/64] |= 1 << (p % 64)
	}
	return nil
}

// element is one entry of a branch or leaf page.
type element struct {
	key, value []byte
	child      uint64 // branch pages
	bucket     bool   // leaf pages: value is a bucket header
}

// elements decodes the elements of a page held in buf (a page of its own
// or an inline bucket's), checking every offset against buf.
func elements(buf []byte) (flags uint16, out []element, err error) {
	if len(buf) < pageHeaderSize {
		return 0, nil, errors.New("short page")
	}
	le := binary.LittleEndian
	flags, count := le.Uint16(buf[8:]), int(le.Uint16(buf[10:]))
	if flags != branchPageFlag && flags != leafPageFlag {
		return flags, nil, fmt.Errorf("flags %#x where a branch or leaf was expected", flags)
	}
	if pageHeaderSize+count*elementSize > len(buf) {
		return flags, nil, fmt.Errorf("%d elements do not fit", count)
	}
	out = make([]element, count)
	for i := range out {
		at := pageHeaderSize + i*elementSize
		e := buf[at : at+elementSize]
		var pos, ksize, vsize uint64
		if flags == branchPageFlag {
			pos, ksize = uint64(le.Uint32(e[0:])), uint64(le.Uint32(e[4:]))
			out[i].child = le.Uint64(e[8:])
		} else {
			out[i].bucket = le.Uint32(e[0:])&bucketLeafFlag != 0
			pos, ksize, vsize = uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
		}
		start := uint64(at) + pos
		if start+ksize+vsize > uint64(len(buf)) {
			return flags, nil, fmt.Errorf("element %d runs past its page", i)
		}
		out[i].key = buf[start : start+ksize]
		out[i].value = buf[start+ksize : start+ksize+vsize]
	}
	return flags, out, nil
}

// walkPage checks page id and everything below it.
func (r *rawIndex) walkPage(id uint64, depth int) error {
	if depth > maxIndexDepth {
		return fmt.Errorf("page %d: deeper than %d levels", id, maxIndexDepth)
	}
	buf, err := r.page(id)
	if err != nil {
		return err
	}
	if err := r.reach(id, uint64(len(buf))/uint64(r.meta.pageSize)); err != nil {
		return err
	}
	if err := r.walkElements(buf, depth); err != nil {
		return fmt.Errorf("page %d: %w", id, err)
	}
	return nil
}

// walkElements checks the elements of buf and what they point to.
func (r *rawIndex) walkElements(buf []byte, depth int) error {
	flags, elems, err := elements(buf)
	if err != nil {
		return err
	}
	for _, e := range elems {
		switch {
		case flags == branchPageFlag:
			err = r.walkPage(e.child, depth+1)
		case e.bucket:
			err = r.walkBucket(e.value, depth+1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// walkBucket checks a bucket given its header (and inline page, if any).
func (r *rawIndex) walkBucket(v []byte, depth int) error {
	if len(v) < bucketHeaderLen {
		return errors.New("short bucket header")
	}
	if root := binary.LittleEndian.Uint64(v); root != 0 {
		return r.walkPage(root, depth)
	}
	if depth > maxIndexDepth {
		return fmt.Errorf("inline bucket deeper than %d levels", maxIndexDepth)
	}
	if flags, _, err := elements(v[bucketHeaderLen:]); err == nil && flags != leafPageFlag {
		return errors.New("inline bucket is not a leaf")
	}
	return r.walkElements(v[bucketHeaderLen:], depth)
}

// walkFreelist checks the freelist page: its ids are in bounds and free.
func (r *rawIndex) walkFreelist() error {
	if r.meta.freelist == noFreelist {
		return nil
	}
	buf, err := r.page(r.meta.freelist)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if err := r.reach(r.meta.freelist, uint64(len(buf))/uint64(r.meta.pageSize)); err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	le := binary.LittleEndian
	if f := le.Uint16(buf[8:]); f != freelistFlag {
		return fmt.Errorf("freelist page %d: flags %#x", r.meta.freelist, f)
	}
	idx, count := uint64(0), uint64(le.Uint16(buf[10:]))
	if count == 0xFFFF {
		if len(buf) < pageHeaderSize+8 {
			return errors.New("freelist: short page")
		}
		idx, count = 1, le.Uint64(buf[pageHeaderSize:])
	}
	if count > uint64(len(buf)-pageHeaderSize)/8-idx {
		return fmt.Errorf("freelist: %d ids do not fit in its page", count)
	}
	for i := idx; i < idx+count; i++ {
		id := le.Uint64(buf[pageHeaderSize+8*i:])
		if id < 2 || id >= r.meta.pgid {
			return fmt.Errorf("freelist: page %d out of bounds", id)
		}
		if r.seen[id/64]&(1<<(id%64)) != 0 {
			return fmt.Errorf("freelist: page %d is free and in use", id)
		}
	}
	return nil
}

// walkIndexFile walks the bbolt file f of the given size and returns what
// is wrong with it, if anything.
func walkIndexFile(f io.ReaderAt, size int64) error {
	r, err := openRawIndex(f, size)
	if err != nil {
		return err
	}
	if err := r.walkPage(r.meta.root, 0); err != nil {
		return err
	}
	return r.walkFreelist()
}

// lookup finds key in the bucket whose header is bucket (nil: the root
// bucket), descending at most maxIndexDepth pages.
func (r *rawIndex) lookup(bucket []byte, key []byte) ([]byte, bool, error) {
	var buf []byte
	var err error
	root := r.meta.root
	if bucket != nil {
		if len(bucket) < bucketHeaderLen {
			return nil, false, errors.New("short bucket header")
		}
		if root = binary.LittleEndian.Uint64(bucket); root == 0 {
			buf = bucket[bucketHeaderLen:]
		}
	}
	for depth := 0; depth <= maxIndexDepth; depth++ {
		if buf == nil {
			if buf, err = r.page(root); err != nil {
				return nil, false, err
			}
		}
		flags, elems, err := elements(buf)
		if err != nil {
			return nil, false, err
		}
		if flags == leafPageFlag {
			for _, e := range elems {
				if bytes.Equal(e.key, key) {
					return e.value, e.bucket, nil
				}
			}
			return nil, false, nil
		}
		if len(elems) == 0 {
			return nil, false, errors.New("empty branch page")
		}
		next := elems[0].child
		for _, e := range elems[1:] {
			if bytes.Compare(e.key, key) > 0 {
				break
			}
			next = e.child
		}
		root, buf = next, nil
	}
	return nil, false, fmt.Errorf("deeper than %d levels", maxIndexDepth)
}
