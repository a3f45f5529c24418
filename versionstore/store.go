// Package versionstore owns the workspace's versions: the bbolt index that maps
// every workspace path to the BLAKE3 hash of its bytes (of its stat, past the
// hashing limit: unhashed.go), the per-file locks, the
// atomic compare-and-swap publish of tool writes and updates, each file's
// bounded history with writer identity, the kept bytes of every version (the
// object store), the journal of changes, checkpoints, restore and rewind,
// snapshots at a checkpoint and the merge of a branch's changes
// (snapshot.go, merge.go; applied whole or not at all, mergeapply.go).
//
// Every path is resolved inside the backing directory first (an os.Root), and
// every operation on a resolved key goes through the descriptor of its
// directory, opened without following a symlink (keydir.go), so nothing here
// can read or write outside the workspace, nor through a link put where a
// directory the index knows used to be. It keeps the actors' observations
// for the policy (observations.go) but decides nothing from them; it knows
// nothing of tools, FUSE or sockets, imports no other package of the
// project and runs no program (a merge's line merge is the caller's
// function, MergeOptions.LineMerge). The index's layout, records and
// schema version are its own (buckets.go, records.go, schema.go): no other
// package reads or writes the index.
//
// It offers storage and versions only: reads that hand on a file's raw
// bytes and report their version, writes under a guard, and Update, which runs a caller's function on a
// file's bytes under its lock and compare-and-swap. It never writes a
// sentence for the model: it fails with *Error values (a Code, a Reason, the
// operation and display path), which toolapi words. What makes a file text
// and what an edit means (literal matching, line endings, the BOM) are
// toolapi's too.
//
// The error codes, the write intents and their order of checks follow the
// reference implementation (docs/reference.md: the TypeScript stack whose
// model-facing behaviour dshfs matches).
//
// The mount's side of the store is one type, Mount (mount.go), returned
// when a mount attaches: the operations only the mount calls, the batch of
// its versions not yet committed, the marks of the files it just created
// or renamed, and the registry of the files it is writing. The tools and
// the CLI never see it.
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
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
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

	// SyncPublishes syncs every tool publish, file and directory, before
	// its commit, instead of letting small ones settle after it
	// (settle.go). A power cut then never leaves the backing directory
	// behind the index, even before the store has opened it again; each
	// edit costs two more syncs.
	SyncPublishes bool

	// MountBatchInterval is how long the mount's versions may wait in
	// memory before they are committed (default DefaultMountBatchInterval).
	// Every tool call, history query, checkpoint and rename commits them
	// first, so it bounds only what a power cut can take: the versions of
	// that last interval that nobody asked for. Shorter costs the mount a
	// durable commit, two fdatasyncs, per interval.
	MountBatchInterval time.Duration

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
	rootDir  *os.File        // the root again, for the descriptors of keydir.go
	rootConn syscall.RawConn // rootDir's, held while a key's directory is used
	rootPath string          // real absolute path of the workspace root
	roots    []string        // every absolute path that names the root
	db       *bolt.DB
	commits  *groupCommitter // every store commit goes through it (groupcommit.go)
	locks    Locks
	log      *slog.Logger
	euid     int // who follows symlinks for the tools (protectedSymlink)
	now      func() time.Time

	baselined atomic.Bool // a walk has indexed the whole workspace (walk.go)

	// fineCtime: the workspace's filesystem (device fineDev) gives a file a
	// new ctime at every change after a stat (probeFineCtime).
	fineCtime bool
	fineDev   uint64

	historyLimit int
	diffBasisMax int
	fileMode     fs.FileMode
	dirMode      fs.FileMode

	onPublish func(key string)
	mount     Mount // the mount's side (mount.go)

	objects *objectStore
	retain  retention

	// settle tracks tool publishes not yet synced (settle.go), unless
	// syncPublishes (Options.SyncPublishes).
	settle        settler
	syncPublishes bool
	// batchEvery is how long the mount's versions wait in memory at most.
	batchEvery time.Duration

	// beforePublish, when set by tests, runs between the check and the
	// publish of a mutation, to stage races deterministically.
	beforePublish func()
	// afterPublish, when set by tests, runs between a publish's rename and
	// the stat its record is made of.
	afterPublish func()
	// mergeSyncFault, when set by tests, fails the sync that makes a
	// merge's files durable.
	mergeSyncFault error

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
	rootDir, rootConn, err := openRootDir(real)
	if err != nil {
		root.Close()
		return nil, err
	}
	s := &Store{
		root:         root,
		rootDir:      rootDir,
		rootConn:     rootConn,
		rootPath:     real,
		log:          opts.Logger,
		euid:         os.Geteuid(),
		now:          opts.Now,
		historyLimit: opts.HistoryLimit,
		stopSync:     make(chan struct{}),
		mount:        Mount{full: make(chan struct{}, 1)},
		onPublish:    opts.OnPublish,

		syncPublishes: opts.SyncPublishes,
		batchEvery:    opts.MountBatchInterval,
	}
	s.fineDev, s.fineCtime = probeFineCtime(int(rootDir.Fd()))
	if s.batchEvery <= 0 {
		s.batchEvery = DefaultMountBatchInterval
	}
	s.mount.s = s
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
	salvaged := false
	if s.db, salvaged, err = openIndex(absIndex, s.log); err != nil {
		root.Close()
		rootDir.Close()
		return nil, err
	}
	s.commits = newGroupCommitter(s.db)
	maxKeep := opts.CaptureMaxBytes
	if maxKeep == 0 {
		maxKeep = DefaultCaptureMaxBytes
	}
	if s.objects, err = newObjectStore(filepath.Join(filepath.Dir(absIndex), "objects"), maxKeep); err != nil {
		s.db.Close()
		root.Close()
		rootDir.Close()
		return nil, err
	}
	if salvaged {
		s.reattachObjects()
	}
	s.retain.init(opts.RetainBytes, opts.RetainAge)
	s.retain.pageSize = int64(s.db.Info().PageSize)
	if err := s.measureKept(); err != nil {
		s.db.Close()
		root.Close()
		rootDir.Close()
		return nil, err
	}
	s.settle.init()
	if err := s.redoUnsettled(); err != nil {
		s.db.Close()
		root.Close()
		rootDir.Close()
		return nil, fmt.Errorf("finish tool writes a crash interrupted: %w", err)
	}
	if err := s.rollBackMerges(); err != nil {
		s.db.Close()
		root.Close()
		rootDir.Close()
		return nil, fmt.Errorf("roll back merges a crash interrupted: %w", err)
	}
	s.syncDone.Add(1)
	go s.flushLoop()
	return s, nil
}

// measureKept counts, at the start, what the retention budget counts: the
// objects kept in files of their own, and the index.
func (s *Store) measureKept() error {
	err := s.db.View(func(tx *bolt.Tx) error {
		s.retain.files.Store(fileBytes(tx))
		return nil
	})
	if err != nil {
		return fmt.Errorf("measure kept objects: %w", err)
	}
	return s.measureIndex()
}

// openRootDir opens the workspace directory as a file: os.Root does not
// hand out its descriptor.
func openRootDir(real string) (*os.File, syscall.RawConn, error) {
	f, err := os.Open(real)
	if err != nil {
		return nil, nil, fmt.Errorf("open workspace: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("open workspace: %w", err)
	}
	return f, rc, nil
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

// flushLoop commits the mount's queued versions every batchEvery, or as
// soon as a batch is full, and settles tool publishes as they come
// (settle.go).
func (s *Store) flushLoop() {
	defer s.syncDone.Done()
	flush := time.NewTicker(s.batchEvery)
	defer flush.Stop()
	for {
		select {
		case <-s.stopSync:
			return
		case <-flush.C:
			s.flushPending()
		case <-s.mount.full:
			s.flushPending()
		case <-s.settle.kick:
			// The records go at once, in a commit of their own: until then
			// a change made straight into the backing directory, however
			// late, could be taken for a lost publish after a power cut.
			s.logErr("settle tool writes", "", s.settleWhere(everything, true))
		}
	}
}

// DB is the index, for tests and benchmarks that look into it or damage
// it. Nothing else uses it: every bucket is the store's (buckets.go), the
// policy's observations included (Observations).
func (s *Store) DB() *bolt.DB { return s.db }

// Root is the real absolute path of the workspace directory.
func (s *Store) Root() string { return s.rootPath }

// Close stops the sync loop and collection, commits the mount's last batch,
// settles the tool writes, marks the index clean and closes it. Its caller
// has stopped the calls into the store first.
func (s *Store) Close() error {
	s.closeMu.Do(func() {
		close(s.stopSync)
		s.syncDone.Wait()
		// No collection runs on, nor starts for the commits below.
		s.retain.close()
		s.flushPending()
		s.logErr("settle tool writes", "", s.settleWhere(everything, true))
		err := errors.Join(markClean(s.db), s.db.Close(), s.root.Close(), s.rootDir.Close())
		if err != nil {
			s.closeErr = fmt.Errorf("close index: %w", err)
		}
	})
	return s.closeErr
}
