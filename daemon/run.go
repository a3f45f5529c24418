package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/internal/quote"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/dshfs/dshfs/versionstore/remote"
)

// unmountErrorFile, in the state directory, says why the last unmount on a
// signal failed (Stop reads it).
const unmountErrorFile = "unmount-error"

// mount is a running daemon: the store, the mount over it and the socket.
type mount struct {
	cfg    Config
	log    *slog.Logger
	store  *versionstore.Store
	fsys   *fusefs.FS
	socket string
	// drain stops serving the socket once the calls under way are over
	// (serve); it may be called more than once.
	drain func()
	// remote ships the history to Config.Remote (nil: none).
	remote *remote.Replicator
	// branches are the workspace's branches (nil for a branch's own mount).
	branches *branches
	isBranch bool
}

// Run mounts cfg.Backing at cfg.MountPoint, serves its tools, and returns
// once it is unmounted: on SIGINT, SIGTERM or SIGHUP, or from outside.
// Readiness, or why there is none, goes to ready (nil: nobody waits, and
// Run says on standard error that it is serving).
func Run(cfg Config, ready *Ready) error {
	err := run(cfg, ready)
	if err != nil {
		ready.Report(err) // the waiting parent prints it, unless it was told "ok"
	}
	return err
}

// oneProcessor runs the daemon's Go code on one processor (P) unless
// GOMAXPROCS says otherwise. A FUSE daemon's goroutines spend their lives
// blocked in reads of /dev/fuse and in system calls on the backing files;
// with a second P the runtime hands Ps between threads and wakes spinning
// ones around every request: extracting 12,000 files took 24 context
// switches and about 500 µs of daemon CPU a file with two, 13 (the C
// loopback's count) and about 300 µs with one (BENCHMARKS.md, "daemon
// CPU"). It must run before the mount: go-fuse sizes its readers by it.
func oneProcessor() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

func run(cfg Config, ready *Ready) error {
	oneProcessor()
	if err := cfg.resolveStateDir(); err != nil {
		return err
	}
	// The kernel applies the caller's umask before a create reaches the
	// daemon; the daemon must not apply its own again. New files written by
	// the tools still get the umask dshfs was started with.
	umask := os.FileMode(syscall.Umask(0))
	m := &mount{cfg: cfg, log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	fileLimit, err := raiseFileLimit()
	if err != nil {
		m.log.Warn("raise the open-file limit", "err", err, "limit", fileLimit)
	}
	unlock, err := lockBacking(cfg.Backing, m.log)
	if err != nil {
		return err
	}
	defer unlock()
	sig := catchSignals()
	defer signal.Stop(sig)
	stop, err := m.start(umask)
	if err != nil {
		return err
	}
	defer stop()
	os.Remove(filepath.Join(cfg.StateDir, unmountErrorFile))
	if cfg.ReplacedDeadMount {
		m.log.Warn("replaced a dead mount: its daemon had exited without unmounting", "mountpoint", cfg.MountPoint)
	}
	m.log.Info("mounted", "backing", cfg.Backing, "mountpoint", cfg.MountPoint, "state", cfg.StateDir, "socket", m.socket,
		"open_file_limit", fileLimit, "passthrough", m.fsys.Passthrough(), "transport", transportText(m.fsys))
	if !ready.Report(nil) {
		fmt.Fprintf(os.Stderr, "dshfs: %s mounted at %s, tools on %s (Ctrl-C to unmount)\n", quote.Name(cfg.Backing), quote.Name(cfg.MountPoint), quote.Name(m.socket))
	}
	return m.wait(sig)
}

// transportText names what carries the mount's requests, and why not
// io_uring when it was asked for.
func transportText(f *fusefs.FS) string {
	name, why := f.Transport()
	if why != "" {
		return name + " (" + why + ")"
	}
	return name
}

// resolveStateDir makes the state directory absolute, the default one if
// none is named (clients anywhere read it from the mount's record), and
// refuses one another user could change or whose socket path is too long.
func (cfg *Config) resolveStateDir() error {
	var err error
	if cfg.StateDir == "" {
		if cfg.StateDir, err = DefaultStateDir(cfg.Backing); err != nil {
			return err
		}
	}
	if cfg.StateDir, err = filepath.Abs(cfg.StateDir); err != nil {
		return err
	}
	if cfg.StateDir, err = PrepareStateDir(cfg.StateDir); err != nil {
		return err
	}
	return checkSocketPath(cfg.StateDir)
}

// catchSignals catches the signals that unmount. They are caught before
// the mount exists: a SIGTERM that arrives as soon as the mount appears
// must still unmount cleanly. SIGHUP (the terminal of a --foreground
// daemon closing) unmounts cleanly too.
func catchSignals() chan os.Signal {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	if !signal.Ignored(syscall.SIGHUP) { // under nohup it stays ignored
		signal.Notify(sig, syscall.SIGHUP)
	}
	return sig
}

// start opens the store, mounts it and serves its tools; the returned
// function drains the serving, stops the baseline and closes the store
// (which commits the mount's last versions and stops collection).
func (m *mount) start(umask os.FileMode) (func(), error) {
	store, err := m.openStore(umask)
	if err != nil {
		return nil, err
	}
	m.store = store
	if err := m.resume(); err != nil {
		store.Close()
		return nil, err
	}
	// A prefix another dshfs replicates to is refused before the mount.
	stopRemote, err := m.startRemote()
	if err != nil {
		store.Close()
		return nil, err
	}
	if err := m.mountFS(); err != nil {
		stopRemote()
		store.Close()
		return nil, err
	}
	if !m.isBranch {
		m.branches = &branches{m: m, umask: umask, all: map[string]*branch{}}
	}
	if m.drain, err = m.serve(); err != nil {
		m.fsys.Unmount()
		stopRemote()
		store.Close()
		return nil, err
	}
	stopBaseline := startBaseline(store, m.cfg.Baseline, m.log)
	if m.branches != nil {
		m.branches.resume()
	}
	return func() {
		m.drain()
		if m.branches != nil {
			m.branches.close()
		}
		t0 := time.Now()
		stopBaseline()
		stopRemote()
		err := store.Close()
		m.log.Info("closed the store", "took", time.Since(t0).Round(time.Millisecond), "err", err)
	}, nil
}

func (m *mount) openStore(umask os.FileMode) (*versionstore.Store, error) {
	return versionstore.Open(m.cfg.Backing, filepath.Join(m.cfg.StateDir, "index.db"), versionstore.Options{
		Umask:      &umask,
		AliasRoots: []string{m.cfg.MountPoint},
		// Before the mount (a --from's rewind) there is nothing to invalidate.
		OnPublish: func(key string) {
			if m.fsys != nil {
				m.fsys.Invalidate(key)
			}
		},
		Logger: m.log,

		CaptureMaxBytes: m.cfg.KeepMaxBytes,
		RetainBytes:     m.cfg.RetainBytes,
		RetainAge:       m.cfg.RetainAge,
		SyncPublishes:   m.cfg.SyncPublishes,
	})
}

// mountFS mounts the store, saying why not in fusermount3's own words.
func (m *mount) mountFS() error {
	logged := logSize(m.cfg.StateDir)
	fsys, err := fusefs.Mount(m.cfg.MountPoint, m.store, fusefs.Options{AllowOther: m.cfg.AllowOther, CacheTimeout: m.cfg.CacheTimeout, MaxWatches: m.cfg.MaxWatches, NoWatch: m.isBranch,
		Debug: m.cfg.Debug, Logger: m.log, NoPassthrough: m.cfg.NoPassthrough, IOUring: m.cfg.IOUring, DaemonInfo: record(m.cfg)})
	if err != nil {
		return explainMountFailure(err, fusermountSaid(m.cfg.StateDir, logged), m.cfg.AllowOther)
	}
	m.fsys = fsys
	return nil
}

// stopWatchdog is how long a stop may take before the daemon logs its
// goroutines.
const stopWatchdog = 20 * time.Second

// wait returns once the mount is gone: unmounted on a signal, or from
// outside. On a signal the socket is drained first: a tool call under way
// finishes with the mount still there (its publish invalidates the
// mount's caches), and the unmount then waits for the shell's requests.
func (m *mount) wait(sig <-chan os.Signal) error {
	done := make(chan struct{})
	go func() { m.fsys.Wait(); close(done) }()
	select {
	case s := <-sig:
		m.log.Info("unmounting", "signal", s.String())
		t0 := time.Now()
		// A stop that hangs says where: dshfs unmount gives up at 60 s.
		watchdog := time.AfterFunc(stopWatchdog, func() {
			m.log.Warn("still stopping; the daemon's goroutines follow", "after", stopWatchdog)
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		})
		defer watchdog.Stop()
		m.drain()
		t1 := time.Now()
		err := m.fsys.Unmount()
		// A stop that takes long says where its time went.
		m.log.Info("unmounted", "drain", t1.Sub(t0).Round(time.Millisecond), "unmount", time.Since(t1).Round(time.Millisecond), "err", err)
		if err != nil {
			// For `dshfs unmount`, which waits for this process to end.
			writeNew(filepath.Join(m.cfg.StateDir, unmountErrorFile), err.Error()+"\n")
			return err
		}
	case <-done:
		m.log.Info("unmounted from outside")
	}
	return nil
}

// writeNew replaces the file at path with a new one holding s, never
// writing through a link left there.
func writeNew(path, s string) error {
	os.Remove(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// startBaseline, if on, indexes the whole workspace in the background, as
// the first checkpoint would: afterwards every file's bytes are kept and a
// checkpoint costs an lstat a file. The returned function stops it.
func startBaseline(store *versionstore.Store, on bool, log *slog.Logger) func() {
	if !on {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t0 := time.Now()
		st, err := store.Sync(ctx, nil)
		if err != nil {
			log.Warn("index the workspace", "err", err)
			return
		}
		log.Info("indexed the workspace", "files", st.Files, "read", st.Read, "kept_bytes", st.Kept,
			"not_kept", st.Skipped, "took", time.Since(t0).Round(time.Millisecond))
	}()
	return func() { cancel(); <-done }
}
