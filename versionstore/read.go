package versionstore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/zeebo/blake3"
	bolt "go.etcd.io/bbolt"
)

// chunkSize is the streaming read unit, as the reference implementation's read
// stream.
const chunkSize = 64 << 10

// chunkPool recycles read buffers: a read of a small file should not cost a
// 64 KiB allocation.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// statTarget stats t's key, never following a symlink: the key has every link
// resolved, so a link there is a dangling one the resolver kept as the key
// (absent, as the reference implementation says) or one put there since, which
// must not lead anywhere. An absent file is (nil, nil); a directory on the way
// that is a link or a file now is FS_NOT_FOUND (ReasonParentNotDir).
func (s *Store) statTarget(t Target, verb string) (fs.FileInfo, error) {
	fi, err := s.lstatKey(t.Key)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, keyError(verb, t.Display, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, nil
	}
	return fi, nil
}

// keyError maps the failure of an operation on a key's file.
func keyError(verb, display string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) {
		e := fail(ReasonParentNotDir, verb, display)
		e.Err = err
		return e
	}
	return osError(verb, display, err)
}

// openRegular opens t's key for reading and checks, on the open descriptor,
// that it is a regular file. O_NONBLOCK keeps a FIFO swapped in after the
// stat from blocking the open; a symlink is not followed (ELOOP).
func (s *Store) openRegular(t Target, verb string) (*os.File, fs.FileInfo, error) {
	f, err := s.openKey(t.Key, os.O_RDONLY|syscall.O_NONBLOCK|oNoatime)
	if errors.Is(err, syscall.EPERM) && oNoatime != 0 {
		// O_NOATIME needs ownership (or CAP_FOWNER); without it, read plainly.
		f, err = s.openKey(t.Key, os.O_RDONLY|syscall.O_NONBLOCK)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fail(ReasonMissing, verb, t.Display)
	case errors.Is(err, syscall.ELOOP):
		return nil, nil, fail(ReasonNotRegular, verb, t.Display)
	case err != nil:
		return nil, nil, keyError(verb, t.Display, err)
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

// Read streams the bytes of t to sink, a chunk at a time, and returns the
// version of exactly the bytes read. Every chunk but the last fills the
// store's 64 KiB buffer, which sink must not keep; last marks the file's
// end (that chunk may be empty). An error from sink ends the read, is
// returned as it is, and nothing is recorded: what makes a file text is the
// caller's rule. The store's own errors: FS_NOT_FOUND (absent),
// FS_NOT_REGULAR_FILE, FS_IO_ERROR, FS_ABORTED.
func (s *Store) Read(ctx context.Context, t Target, sink func(chunk []byte, last bool) error) (Version, error) {
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
	known, unkept, err := s.knownRecord(t.Key, before)
	if err != nil {
		return Version{}, indexReadError("read", t.Display, err)
	}
	if unkept {
		kept = make([]byte, 0, before.Size())
	}
	hashed := s.objects.hashes(before.Size())
	v, err := streamBytes(ctx, f, sink, t.Display, &kept, hashed)
	if err != nil {
		return Version{}, err
	}
	if !hashed {
		v = unhashedVersion(fingerprintOf(before)) // see unhashed.go
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

// knownRecord returns the index entry of key if it names the file with stat
// fi and its bytes are kept, and otherwise whether a read should keep them
// (the store keeps files of its size). A racy fingerprint counts as the same
// file here: at worst the bytes of a same-size rewrite within one timestamp
// tick go unkept, where checking would cost every read of a fresh file a
// commit. An entry that cannot be read is an error, not an unknown file.
func (s *Store) knownRecord(key string, fi fs.FileInfo) (known record, unkept bool, err error) {
	var r record
	var found, present bool
	err = s.db.View(func(tx *bolt.Tx) (err error) {
		r, found, err = getRecord(tx, key)
		present = found && !r.Version.IsZero() && s.objects.present(tx, r.Version)
		return err
	})
	if present && s.matchesRecord(key, r, fingerprintOf(fi)) {
		known = r
	}
	unkept = known.Version.IsZero() && s.objects.capturing() && s.objects.keeps(fi.Size())
	return known, unkept, err
}

// streamBytes hands every byte of r to sink, hashing them if hash (else
// the version returned is zero), and appends them to *keep unless it is nil.
func streamBytes(ctx context.Context, r io.Reader, sink func([]byte, bool) error, display string, keep *[]byte, hash bool) (Version, error) {
	h := io.Writer(io.Discard)
	hasher := blake3.New()
	if hash {
		h = hasher
	}
	bp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bp)
	for {
		if ctx.Err() != nil {
			return Version{}, fail(ReasonAborted, "read", "")
		}
		n, err := io.ReadFull(r, *bp)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return Version{}, osError("read", display, err)
		}
		chunk := (*bp)[:n]
		h.Write(chunk)
		if *keep != nil {
			*keep = append(*keep, chunk...)
		}
		last := err != nil
		if err := sink(chunk, last); err != nil {
			return Version{}, err
		}
		if last {
			var v Version
			if hash {
				hasher.Sum(v[:0])
			}
			return v, nil
		}
	}
}

// errGrew is readWhole's answer for a file that holds more than the limit
// it was given: it grew since its stat said it would fit.
var errGrew = errors.New("the file grew past its size at stat")

// readWhole reads all of t's regular file, at most limit bytes (errGrew
// beyond), and returns its bytes and the stat of the open descriptor taken
// before reading. The limit holds whatever the file does meanwhile: whoever
// may write it could make it a terabyte of holes between the stat that
// chose to read it whole and the read.
func (s *Store) readWhole(t Target, verb string, limit int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := s.openRegular(t, verb)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, nil, errGrew
	}
	data := make([]byte, 0, fi.Size()+1)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if int64(len(data)) > limit {
			return nil, nil, errGrew
		}
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
// Read.
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
		_, unkept, err := s.knownRecord(t.Key, after)
		if err != nil {
			return nil, Version{}, indexReadError("read", t.Display, err)
		}
		if unkept {
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
