// Package versionstore owns the workspace's versions: the bbolt index that maps
// every workspace path to the BLAKE3 hash of its bytes, the per-file locks, the
// atomic compare-and-swap publish of tool writes and updates, each file's
// bounded history with writer identity, the kept bytes of every version (the
// object store), the journal of changes, checkpoints, restore and rewind.
//
// Every file access goes through an os.Root on the backing directory and every
// path is resolved inside it first, so nothing here can read or write outside
// the workspace. The package knows nothing of actors' observations, tools,
// FUSE or sockets, and imports no other package of the project.
//
// It offers storage and versions only: reads that hand on a file's raw
// bytes and report their version, writes under a guard, and Update, which runs a caller's function on a
// file's bytes under its lock and compare-and-swap. It never writes a
// sentence for the model: it fails with *Error values (a Code, a Reason, the
// operation and display path), which toolapi words. What makes a file text
// and what an edit means (literal matching, line endings, the BOM) are
// toolapi's too.
package versionstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Options tune a Store. The zero value is usable.
type Options struct {
	// HistoryLimit bounds the history kept per path (default 64).
	HistoryLimit int
	// Umask is applied to 0666 for new files and 0777 for new directories,
	// the way a shell would. It should be the umask the process started with
	// (a FUSE daemon later runs with umask 0). Default 022.
	Umask *fs.FileMode
	// AliasRoots are other absolute paths that name the workspace root, such
	// as the mount point: absolute symlinks into them stay inside.
	AliasRoots []string
	// SyncInterval is how often index changes are made durable (default 1s).
	// Commits themselves do not fsync: the index is rebuilt from the files'
	// bytes, which every publish fsyncs, so a crash loses at most this much
	// history and attribution, never a version check.
	SyncInterval time.Duration
	// DiffBasisMaxBytes bounds the prior text a write returns for its diff
	// (default DefaultDiffBasisMaxBytes).
	DiffBasisMaxBytes int
	// OnPublish, if set, is called after a tool write or edit published new
	// bytes for key, outside every lock (the mount invalidates its caches).
	OnPublish func(key string)
	// Logger receives unexpected errors (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock versions are recorded by (default time.Now). Tests
	// move it forward to make fresh files' timestamps settled.
	Now func() time.Time

	// CaptureMaxBytes is the largest file whose bytes are kept in the
	// object store (default DefaultCaptureMaxBytes); larger files keep
	// versions only. Negative keeps no bytes at all.
	CaptureMaxBytes int64
	// RetainBytes is the object store's budget (default DefaultRetainBytes);
	// RetainAge drops older bytes (default DefaultRetainAge). Collection
	// never drops the current version of a file or one a checkpoint needs.
	RetainBytes int64
	RetainAge   time.Duration
}

// Store is the versioned view of one workspace directory.
type Store struct {
	root     *os.Root
	rootPath string   // real absolute path of the workspace root
	roots    []string // every absolute path that names the root
	db       *bolt.DB
	locks    Locks
	log      *slog.Logger
	euid     int // who follows symlinks for the tools (protectedSymlink)
	now      func() time.Time

	baselined atomic.Bool  // a walk has indexed the whole workspace (walk.go)
	writers   atomic.Value // writersBox: the files the mount is writing (mount.go)

	historyLimit int
	diffBasisMax int
	fileMode     fs.FileMode
	dirMode      fs.FileMode

	onPublish func(key string)
	mount     mountState

	objects *objectStore
	retain  retention

	// beforePublish, when set by tests, runs between the check and the
	// publish of a mutation, to stage races deterministically.
	beforePublish func()

	stopSync chan struct{}
	syncDone sync.WaitGroup
	closeMu  sync.Once
	closeErr error
}

// Open opens the workspace at dir with its index at indexPath (created if
// missing). The index must live outside the workspace.
func Open(dir, indexPath string, opts Options) (*Store, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	if real, err = filepath.Abs(real); err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	absIndex, err := filepath.Abs(indexPath)
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	if inside(real, absIndex) || inside(filepath.Clean(dir), absIndex) {
		return nil, fmt.Errorf("open index: %s is inside the workspace %s", absIndex, real)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	s := &Store{
		root:         root,
		rootPath:     real,
		log:          opts.Logger,
		euid:         os.Geteuid(),
		now:          opts.Now,
		historyLimit: opts.HistoryLimit,
		stopSync:     make(chan struct{}),
		onPublish:    opts.OnPublish,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.diffBasisMax = opts.DiffBasisMaxBytes; s.diffBasisMax <= 0 {
		s.diffBasisMax = DefaultDiffBasisMaxBytes
	}
	if s.historyLimit <= 0 {
		s.historyLimit = 64
	}
	umask := fs.FileMode(0o022)
	if opts.Umask != nil {
		umask = *opts.Umask & 0o777
	}
	s.fileMode, s.dirMode = 0o666&^umask, 0o777&^umask
	s.roots = appendRoots([]string{real}, dir)
	for _, a := range opts.AliasRoots {
		s.roots = appendRoots(s.roots, a)
	}
	if s.db, err = openIndex(absIndex, s.log); err != nil {
		root.Close()
		return nil, err
	}
	maxKeep := opts.CaptureMaxBytes
	if maxKeep == 0 {
		maxKeep = DefaultCaptureMaxBytes
	}
	if s.objects, err = newObjectStore(filepath.Join(filepath.Dir(absIndex), "objects"), maxKeep); err != nil {
		s.db.Close()
		root.Close()
		return nil, err
	}
	s.retain.init(opts.RetainBytes, opts.RetainAge)
	s.db.View(func(tx *bolt.Tx) error {
		s.retain.stored.Store(storedBytes(tx))
		return nil
	})
	interval := opts.SyncInterval
	if interval <= 0 {
		interval = time.Second
	}
	s.syncDone.Add(1)
	go s.syncLoop(interval)
	return s, nil
}

func appendRoots(roots []string, p string) []string {
	if !filepath.IsAbs(p) {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
	}
	for _, c := range []string{filepath.Clean(p), evalOr(p)} {
		if !contains(roots, c) {
			roots = append(roots, c)
		}
	}
	return roots
}

func evalOr(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// inside reports whether p is dir or below it (both absolute and clean).
func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// openIndex opens the bbolt file. Commits skip fsync (see Options.SyncInterval),
// so after an unclean shutdown the file is checked, and a damaged one is moved
// aside: the versions it held are recomputed from the files on first access.
func openIndex(path string, log *slog.Logger) (*bolt.DB, error) {
	if err := prepareIndexFile(path); err != nil {
		return nil, err
	}
	// The freelist is synced (NoFreelistSync off): otherwise bbolt rebuilds
	// it on open by walking every page in a goroutine of its own, which
	// panics the process on a damaged page before anything can check it.
	bopts := &bolt.Options{Timeout: time.Second, NoSync: true, FreelistType: bolt.FreelistMapType}
	db, err := openBolt(path, bopts)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open index %s: another process holds it", path)
	}
	if err == nil {
		if err = prepareIndex(db); err == nil {
			return db, nil
		}
		db.Close()
	}
	aside := fmt.Sprintf("%s.damaged-%d", path, time.Now().Unix())
	log.Warn("index damaged, starting a new one", "path", path, "moved_to", aside, "err", err)
	if rerr := os.Rename(path, aside); rerr != nil {
		return nil, fmt.Errorf("open index: %w (and moving it aside: %v)", err, rerr)
	}
	db, err = openBolt(path, bopts)
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	if err := prepareIndex(db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// openBolt opens the bbolt file, turning a panic on a damaged file into an
// error.
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open index: %v", r)
		}
	}()
	return bolt.Open(path, 0o600, opts)
}

// prepareIndex checks the file after an unclean shutdown, creates the
// buckets, and clears the clean-shutdown mark until Close sets it again.
func prepareIndex(db *bolt.DB) error {
	clean := false
	err := db.View(func(tx *bolt.Tx) error {
		if m := tx.Bucket(bucketMeta); m != nil && m.Get(keyClean) != nil {
			clean = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !clean {
		if err := checkIndex(db); err != nil {
			return err
		}
	}
	return db.Update(func(tx *bolt.Tx) error {
		if err := initBuckets(tx); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Delete(keyClean)
	})
}

// checkIndex runs bbolt's consistency check. It reads every error (the
// checker blocks until they are all taken) and turns the panics bbolt raises
// on damaged pages into an error.
func checkIndex(db *bolt.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("index check: %v", r)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		var errs []error
		for cerr := range tx.Check() {
			errs = append(errs, cerr)
		}
		if len(errs) > 0 {
			return fmt.Errorf("index check: %w", errors.Join(errs...))
		}
		return nil
	})
}

// syncLoop makes index commits durable every interval, and only when
// something was written since the last sync.
func (s *Store) syncLoop(interval time.Duration) {
	defer s.syncDone.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	var synced int64
	flush := time.NewTicker(mountFlushInterval)
	defer flush.Stop()
	for {
		select {
		case <-s.stopSync:
			return
		case <-flush.C:
			s.flushPending()
		case <-t.C:
			s.flushPending()
			st := s.db.Stats()
			if w := st.TxStats.GetWrite(); w != synced {
				if err := s.db.Sync(); err != nil {
					s.log.Error("sync index", "err", err)
					continue
				}
				synced = w
			}
		}
	}
}

// DB is the index, for packages that keep their own buckets beside the
// store's (the policy's observations). They must not touch the store's buckets.
func (s *Store) DB() *bolt.DB { return s.db }

// Root is the real absolute path of the workspace directory.
func (s *Store) Root() string { return s.rootPath }

// Locks is the per-file lock table, shared with the FUSE layer.
func (s *Store) Locks() *Locks { return &s.locks }

// Close marks the index clean, makes it durable and closes it.
func (s *Store) Close() error {
	s.closeMu.Do(func() {
		close(s.stopSync)
		s.syncDone.Wait()
		s.flushPending()
		s.retain.wait()
		err := s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keyClean, []byte{1})
		})
		err = errors.Join(err, s.db.Sync(), s.db.Close(), s.root.Close())
		if err != nil {
			s.closeErr = fmt.Errorf("close index: %w", err)
		}
	})
	return s.closeErr
}
