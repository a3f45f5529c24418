package versionstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The start of an index. An index closed cleanly carries the clean mark: the
// txid of the commit that set it, so a mark that later commits outlived (its
// clearing lost in a crash) is stale and not believed. Any other index may be
// damaged, and nothing reads it through bbolt before walkIndexFile has
// checked every page bbolt would follow (indexcheck.go); then bbolt's own
// check runs, under recover and a deadline. The mark is cleared durably
// before the store serves anything.

// checkTimeout bounds bbolt's consistency check, so a start never hangs
// on it. A check that cannot finish in time fails the open; it is not taken
// for damage: the page walk before it has already ruled out what makes
// bbolt loop or fault (cycles, pages out of bounds, bad types), so what is
// left is a slow disk or a large index on a busy machine, and salvaging a
// healthy index would cost the history nothing to gain. The next start
// checks it again.
var checkTimeout = time.Minute

// errIndexHeld says another process has the index open.
var errIndexHeld = errors.New("another process holds it")

// indexDamage marks what is wrong with the index's structure: the page
// walk's and bbolt's check's findings, bbolt's refusal of its meta pages,
// a panic on its pages. Only these salvage the index; any other error (a
// full disk, EIO, a lock or mmap error, a check that did not finish) fails
// the open and moves nothing.
type indexDamage struct{ err error }

func (d indexDamage) Error() string { return d.err.Error() }
func (d indexDamage) Unwrap() error { return d.err }

func isDamage(err error) bool {
	var d indexDamage
	return errors.As(err, &d)
}

// damage marks a finding of the page walk as damage, unless an errno in it
// says that the disk failed, not the index.
func damage(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return err
	}
	return indexDamage{err}
}

// openIndex opens the bbolt file at path, creating it if missing. A damaged
// one is salvaged into a new one, and kept beside it (salvage.go); versions
// it lost are recomputed from the files on first access.
func openIndex(path string, log *slog.Logger) (db *bolt.DB, salvaged bool, err error) {
	if err := prepareIndexFile(path); err != nil {
		return nil, false, err
	}
	// NoSync is off: a commit that skipped its fdatasyncs can reach the disk
	// as a meta page without the pages it points to, or overwrite pages the
	// last durable state still uses, and a power cut then damages the file,
	// not just loses the newest commits. groupcommit.go shares the syncs.
	// The freelist is synced (NoFreelistSync off): otherwise bbolt rebuilds
	// it on open by walking every page in a goroutine of its own.
	bopts := &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType}
	db, err = openChecked(path, bopts)
	switch {
	case err == nil:
		return db, false, nil
	case errors.Is(err, errIndexHeld):
		return nil, false, fmt.Errorf("open index %s: %w", path, errIndexHeld)
	case errors.As(err, new(*schemaError)):
		return nil, false, fmt.Errorf("open index %s: %w; %s", path, err, schemaHint(path))
	case errors.Is(err, errCheckTimeout):
		return nil, false, fmt.Errorf("open index %s: %w; it is kept as it is, start again when the machine is less busy", path, err)
	case !isDamage(err):
		return nil, false, fmt.Errorf("open index %s: %w; it is kept as it is, make room or repair the disk where the state lives and start again", path, err)
	}
	log.Warn("index damaged, salvaging it into a new one", "path", path, "err", err)
	if db, err = salvageIndex(path, bopts, log); err != nil {
		hint := "the damaged index is kept as it is, make room or repair the disk where the state lives and start again"
		if errors.As(err, new(*schemaError)) {
			hint = schemaHint(path)
		}
		return nil, false, fmt.Errorf("salvage index %s: %w; %s", path, err, hint)
	}
	return db, true, nil
}

// openChecked opens the index at path, checked first unless it was closed
// cleanly, and clears its clean mark durably.
func openChecked(path string, bopts *bolt.Options) (*bolt.DB, error) {
	clean, err := examineIndex(path)
	if err != nil {
		return nil, err
	}
	db, err := openBolt(path, bopts)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, errIndexHeld
	}
	if err != nil {
		return nil, err
	}
	if !clean {
		if err := checkIndex(db); err != nil {
			if !errors.Is(err, errCheckTimeout) {
				err = indexDamage{err}
			}
			if errors.Is(err, errCheckTimeout) {
				go db.Close() // waits for the check's transaction
			} else {
				db.Close()
			}
			return nil, err
		}
	}
	if err := prepareIndex(db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// examineIndex reports whether the index at path was closed cleanly, and
// for one that was not, whether its pages are sound. It holds the file's
// lock meanwhile, so it never reads an index another process is writing.
func examineIndex(path string) (clean bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil // bbolt creates it
	}
	if err != nil {
		return false, fmt.Errorf("open index: %w", err)
	}
	defer f.Close()
	if err := lockWithin(f, time.Second); err != nil {
		return false, err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err == nil, err // an empty file: bbolt initializes it
	}
	defer func() {
		if r := recover(); r != nil {
			clean, err = false, indexDamage{fmt.Errorf("index check: %v", r)}
		}
	}()
	r, err := openRawIndex(f, fi.Size())
	if err != nil {
		return false, damage(fmt.Errorf("index check: %w", err))
	}
	if r.cleanMark() {
		return true, nil
	}
	if err := walkIndexFile(f, fi.Size()); err != nil {
		return false, damage(fmt.Errorf("index check: %w", err))
	}
	return false, nil
}

// lockWithin takes f's exclusive lock (bbolt's), waiting up to d.
func lockWithin(f *os.File, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != syscall.EWOULDBLOCK {
			return fmt.Errorf("lock index: %w", err)
		}
		if time.Now().After(deadline) {
			return errIndexHeld
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanMark reports whether the index carries a clean mark set by its last
// commit.
func (r *rawIndex) cleanMark() bool {
	meta, isBucket, err := r.lookup(nil, bucketMeta)
	if err != nil || !isBucket {
		return false
	}
	v, _, err := r.lookup(meta, keyClean)
	return err == nil && len(v) == 8 && binary.BigEndian.Uint64(v) == r.meta.txid
}

// markClean sets the clean mark: the txid of the commit that sets it.
func markClean(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyClean, binary.BigEndian.AppendUint64(nil, uint64(tx.ID())))
	})
}

// openBolt opens the bbolt file, turning a panic or a fault on a damaged
// file into an error.
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = indexDamage{fmt.Errorf("open index: %v", r)}
		}
	}()
	db, err = bolt.Open(path, 0o600, opts)
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
		err = indexDamage{err}
	}
	return db, err
}

// prepareIndex creates the buckets and clears the clean-shutdown mark
// (durably: the commit fsyncs) until Close sets it again.
func prepareIndex(db *bolt.DB) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = indexDamage{fmt.Errorf("prepare index: %v", r)}
		}
	}()
	return db.Update(func(tx *bolt.Tx) error {
		if err := initBuckets(tx); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(keyClean)
	})
}

var errCheckTimeout = errors.New("index check did not finish")

// checkIndex runs bbolt's consistency check, up to checkTimeout. It reads
// every error (the checker blocks until they are all taken) and turns the
// panics bbolt raises on damaged pages into an error.
func checkIndex(db *bolt.DB) error {
	done := make(chan error, 1)
	check := boltCheck
	go func() { done <- check(db) }()
	select {
	case err := <-done:
		return err
	case <-time.After(checkTimeout):
		return fmt.Errorf("%w within %v", errCheckTimeout, checkTimeout)
	}
}

// boltCheck is bbolt's check under recover (a variable: tests stall it).
var boltCheck = checkIndexNow

func checkIndexNow(db *bolt.DB) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("index check: %v", r)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		var errs []error
		n := 0
		for cerr := range tx.Check() {
			if n++; len(errs) < 3 { // each can quote whole keys
				errs = append(errs, cerr)
			}
		}
		if n > len(errs) {
			errs = append(errs, fmt.Errorf("and %d more", n-len(errs)))
		}
		if len(errs) > 0 {
			return fmt.Errorf("index check: %w", errors.Join(errs...))
		}
		return nil
	})
}
