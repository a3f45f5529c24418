package versionstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/zeebo/blake3"
	bolt "go.etcd.io/bbolt"
)

const (
	// chunkSize is the streaming read unit, as the reference's read stream.
	chunkSize = 64 << 10
	// binarySniff is how many leading bytes a read checks for NUL.
	binarySniff = 8192
)

var bom = []byte{0xEF, 0xBB, 0xBF}

// chunkPool recycles read buffers: a read of a small file should not cost a
// 64 KiB allocation.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// statTarget stats t's key, following a final symlink. An absent file (or a
// dangling link) is (nil, nil).
func (s *Store) statTarget(t Target, verb string) (fs.FileInfo, error) {
	fi, err := s.root.Stat(t.Key)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		// A dangling link the resolver kept as the key (os.Root also
		// refuses to follow absolute links): absent, as the reference says.
		if lfi, lerr := s.root.Lstat(t.Key); lerr == nil && lfi.Mode()&fs.ModeSymlink != 0 {
			return nil, nil
		}
	}
	if err != nil {
		return nil, osError(verb, t.Display, err)
	}
	return fi, nil
}

// openRegular opens t's key for reading and checks, on the open descriptor,
// that it is a regular file. O_NONBLOCK keeps a FIFO swapped in after the
// stat from blocking the open.
func (s *Store) openRegular(t Target, verb string) (*os.File, fs.FileInfo, error) {
	f, err := s.root.OpenFile(t.Key, os.O_RDONLY|syscall.O_NONBLOCK|oNoatime, 0)
	if errors.Is(err, syscall.EPERM) && oNoatime != 0 {
		// O_NOATIME needs ownership (or CAP_FOWNER); without it, read plainly.
		f, err = s.root.OpenFile(t.Key, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fail(ReasonMissing, verb, t.Display)
	}
	if err != nil {
		return nil, nil, osError(verb, t.Display, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, osError(verb, t.Display, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fail(ReasonNotRegular, verb, t.Display)
	}
	return f, fi, nil
}

// ReadText streams the text of t to sink in decoded chunks (valid UTF-8,
// split at rune boundaries, one leading BOM removed) and returns the version
// of exactly the bytes it read. Errors, in the reference's order:
// FS_NOT_FOUND (absent), FS_NOT_REGULAR_FILE, FS_NOT_TEXT ("binary file" for
// a NUL in the first 8192 bytes, else "invalid UTF-8 text" anywhere).
// sink may already have seen chunks when an error is returned.
func (s *Store) ReadText(ctx context.Context, t Target, sink func(string)) (Version, error) {
	if ctx.Err() != nil {
		return Version{}, fail(ReasonAborted, "read", "")
	}
	s.flushPending()
	fi, err := s.statTarget(t, "read")
	if err != nil {
		return Version{}, err
	}
	if fi == nil {
		s.noteAbsent(t.Key)
		return Version{}, fail(ReasonMissing, "read", t.Display)
	}
	if !fi.Mode().IsRegular() {
		return Version{}, fail(ReasonNotRegular, "read", t.Display)
	}
	at := s.now() // before the fingerprint is taken, for the racy rule
	f, before, err := s.openRegular(t, "read")
	if err != nil {
		return Version{}, err
	}
	defer f.Close()
	// The bytes read are kept if they are not yet: a change made behind the
	// store's back later can then be undone.
	var kept []byte
	known, unkept := s.knownRecord(t.Key, before)
	if unkept {
		kept = make([]byte, 0, before.Size())
	}
	v, err := streamText(ctx, f, sink, t.Display, &kept)
	if err != nil {
		return Version{}, err
	}
	after, err := f.Stat()
	switch {
	case err != nil || fingerprintOf(after) != fingerprintOf(before) || kept != nil && int64(len(kept)) != after.Size():
	case kept == nil && known.Version == v:
		// The index held these very bytes, kept: nothing to record.
	default:
		s.noteVersion(t.Key, fingerprintOf(after), v, at, kept)
	}
	return v, nil
}

// unkept reports whether the bytes of the file key, with stat fi, should be
// kept by a read.
func (s *Store) unkept(key string, fi fs.FileInfo) bool {
	_, unkept := s.knownRecord(key, fi)
	return unkept
}

// knownRecord returns the index entry of key if it names the file with stat
// fi and its bytes are kept, and otherwise whether a read should keep them
// (the store keeps files of its size). A racy fingerprint counts as the same
// file here: at worst the bytes of a same-size rewrite within one timestamp
// tick go unkept, where checking would cost every read of a fresh file a
// commit.
func (s *Store) knownRecord(key string, fi fs.FileInfo) (known record, unkept bool) {
	fp := fingerprintOf(fi)
	s.db.View(func(tx *bolt.Tx) error {
		r, found, err := getRecord(tx, key)
		if err == nil && found && r.FP == fp && !r.Version.IsZero() && s.objects.present(tx, r.Version) {
			known = r
		}
		return nil
	})
	unkept = known.Version.IsZero() && s.objects.capturing() && s.objects.keeps(fi.Size())
	return known, unkept
}

// streamText hashes every byte of r while decoding it into sink, and
// appends them to *keep unless it is nil.
func streamText(ctx context.Context, r io.Reader, sink func(string), display string, keep *[]byte) (Version, error) {
	h := blake3.New()
	bp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bp)
	buf := *bp
	var carry int // bytes of an incomplete rune kept at the front of buf
	first := true
	for {
		if ctx.Err() != nil {
			return Version{}, fail(ReasonAborted, "read", "")
		}
		n, err := io.ReadFull(r, buf[carry:])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return Version{}, osError("read", display, err)
		}
		h.Write(buf[carry : carry+n])
		if *keep != nil {
			*keep = append(*keep, buf[carry:carry+n]...)
		}
		data := buf[:carry+n]
		if first {
			if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
				return Version{}, fail(ReasonBinary, "read", display)
			}
			data = bytes.TrimPrefix(data, bom)
			first = false
		}
		end := len(data)
		if err == nil {
			end = completePrefix(data)
		}
		if !utf8.Valid(data[:end]) {
			return Version{}, fail(ReasonInvalidUTF8, "read", display)
		}
		if end > 0 {
			sink(string(data[:end]))
		}
		if err != nil {
			var v Version
			h.Sum(v[:0])
			return v, nil
		}
		carry = copy(buf, data[end:])
	}
}

// completePrefix is the length of the longest prefix of b that does not end
// inside a multi-byte sequence that more input could complete.
func completePrefix(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		c := b[i]
		if c < utf8.RuneSelf {
			return len(b)
		}
		if utf8.RuneStart(c) {
			if need := seqLen(c); need > 0 && i+need > len(b) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}

// seqLen is the length of the UTF-8 sequence a lead byte announces (0 if none).
func seqLen(c byte) int {
	switch {
	case c&0xE0 == 0xC0:
		return 2
	case c&0xF0 == 0xE0:
		return 3
	case c&0xF8 == 0xF0:
		return 4
	}
	return 0
}

// readWhole reads all of t's regular file and returns its bytes and the
// stat of the open descriptor taken before reading.
func (s *Store) readWhole(t Target, verb string) ([]byte, fs.FileInfo, error) {
	f, fi, err := s.openRegular(t, verb)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data := make([]byte, 0, fi.Size()+1)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, fi, nil
		}
		if err != nil {
			return nil, nil, osError(verb, t.Display, err)
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// ReadBytes returns the bytes of t and their version, refusing a file of
// more than maxBytes (FS_TOO_LARGE): by its size before reading, or by what
// the read found if it grew since. It never reads more than maxBytes+1
// bytes. Absent files are FS_NOT_FOUND, others FS_NOT_REGULAR_FILE, as for
// ReadText.
func (s *Store) ReadBytes(ctx context.Context, t Target, maxBytes int64) ([]byte, Version, error) {
	if ctx.Err() != nil {
		return nil, Version{}, fail(ReasonAborted, "read", "")
	}
	s.flushPending()
	fi, err := s.statTarget(t, "read")
	if err != nil {
		return nil, Version{}, err
	}
	if fi == nil {
		s.noteAbsent(t.Key)
		return nil, Version{}, fail(ReasonMissing, "read", t.Display)
	}
	if !fi.Mode().IsRegular() {
		return nil, Version{}, fail(ReasonNotRegular, "read", t.Display)
	}
	if fi.Size() > maxBytes {
		return nil, Version{}, tooLarge(t.Display, fi.Size(), maxBytes)
	}
	at := s.now()
	f, before, err := s.openRegular(t, "read")
	if err != nil {
		return nil, Version{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, Version{}, osError("read", t.Display, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, Version{}, tooLarge(t.Display, -1, maxBytes)
	}
	v := Sum(data)
	if after, err := f.Stat(); err == nil && fingerprintOf(after) == fingerprintOf(before) && after.Size() == int64(len(data)) {
		var kept []byte
		if s.unkept(t.Key, after) {
			kept = data
		}
		s.noteVersion(t.Key, fingerprintOf(after), v, at, kept)
	}
	return data, v, nil
}

// tooLarge is a read refused at maxBytes: size is the file's stat size, or
// -1 when it grew past the limit while being read.
func tooLarge(display string, size, maxBytes int64) *Error {
	e := fail(ReasonTooLarge, "read", display)
	e.Size, e.Limit = size, maxBytes
	return e
}
