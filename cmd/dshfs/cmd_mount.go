package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

// mountOptions are the flags of `dshfs mount`.
type mountOptions struct {
	Backing      string
	Mountpoint   string
	StateDir     string
	Foreground   bool
	ReadyFd      int // set in the detached daemon: where to report readiness
	NoPolicy     bool
	AllowOther   bool
	CacheTimeout time.Duration
	Debug        bool
	MaxImageSize int64 // bytes; 0: the reference's 3.5 MiB
	KeepMax      int64 // largest file whose bytes are kept; 0: 64 MiB
	RetainBytes  int64
	RetainAge    time.Duration
}

func mountCommand() *cli.Command {
	var o mountOptions
	return &cli.Command{
		Name:      "mount",
		Usage:     "mount a versioned view of BACKING at MOUNTPOINT",
		ArgsUsage: "BACKING MOUNTPOINT",
		Description: "Every write through the mount gets a content-hash version, attributed to the writing process.\n" +
			"SIGINT or SIGTERM flushes the index and unmounts cleanly. A mount left behind by a crash is\n" +
			"detected and replaced. The mount point must be outside the backing directory.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "foreground", Usage: "stay attached instead of returning once mounted", Destination: &o.Foreground},
			&cli.IntFlag{Name: "ready-fd", Hidden: true, Destination: &o.ReadyFd},
			&cli.StringFlag{Name: "state", Usage: "state directory holding the index (default: per-workspace under the user's state dir)", Destination: &o.StateDir},
			&cli.BoolFlag{Name: "no-policy", Usage: "serve the bare provider: no read-before-write checks", Destination: &o.NoPolicy},
			&cli.BoolFlag{Name: "allow-other", Usage: "let other users use the mount (non-root needs user_allow_other in /etc/fuse.conf)", Destination: &o.AllowOther},
			&cli.DurationFlag{Name: "cache-timeout", Usage: "how long the kernel may cache entries and attributes (default: 30s while the backing tree can be watched, else 1s)", Destination: &o.CacheTimeout},
			&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request", Destination: &o.Debug},
			&cli.Int64Flag{Name: "keep-max-bytes", Usage: "largest file whose versions' bytes are kept (default: 64 MiB); -1 keeps none", Destination: &o.KeepMax},
			&cli.Int64Flag{Name: "retain-bytes", Usage: "budget for kept bytes (default: 2 GiB)", Destination: &o.RetainBytes},
			&cli.DurationFlag{Name: "retain-age", Usage: "drop kept bytes older than this, unless current or checkpointed (default: 720h)", Destination: &o.RetainAge},
			&cli.Int64Flag{Name: "max-image-bytes", Usage: "largest file read_image returns (default: 3670016, 3.5 MiB)", Destination: &o.MaxImageSize},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("mount takes BACKING and MOUNTPOINT", exitUsage)
			}
			o.Backing, o.Mountpoint = c.Args().Get(0), c.Args().Get(1)
			if fi, err := os.Stat(o.Backing); err != nil || !fi.IsDir() {
				return cli.Exit(fmt.Sprintf("backing directory %s is not a directory", o.Backing), exitFailure)
			}
			if o.MaxImageSize < 0 || o.RetainBytes < 0 || o.RetainAge < 0 {
				return cli.Exit("--max-image-bytes, --retain-bytes and --retain-age must be positive", exitUsage)
			}
			if !o.Foreground {
				return daemonize(o, c.App.Name)
			}
			ready := openReadyPipe(o.ReadyFd)
			err := runMount(o, ready)
			if err != nil {
				ready.report(err) // the waiting parent prints it, unless it was told "ok"
			}
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			return nil
		},
	}
}

func runMount(o mountOptions, ready *readyPipe) error {
	backing, err := filepath.Abs(o.Backing)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(backing); err == nil {
		backing = real // registered, and found by the CLI, under its real path
	}
	mnt, err := filepath.Abs(o.Mountpoint)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(backing); err != nil || !fi.IsDir() {
		return fmt.Errorf("backing directory %s is not a directory", o.Backing)
	}
	if err := recoverStaleMount(mnt); err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(mnt); err == nil {
		mnt = real // registered, and listed by the kernel, under its real path
	}
	if err := notMounted(mnt); err != nil {
		return err
	}
	if o.StateDir == "" {
		if o.StateDir, err = defaultStateDir(backing); err != nil {
			return err
		}
	}
	// The kernel applies the caller's umask before a create reaches the
	// daemon; the daemon must not apply its own again. New files written by
	// the tools still get the umask dshfs was started with.
	umask := os.FileMode(syscall.Umask(0))
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	fileLimit, err := raiseFileLimit()
	if err != nil {
		log.Warn("raise the open-file limit", "err", err, "limit", fileLimit)
	}
	// Signals are caught before the mount exists: a SIGTERM that arrives
	// as soon as the mount appears must still unmount cleanly. SIGHUP (the
	// terminal of a --foreground daemon closing) unmounts cleanly too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	if !signal.Ignored(syscall.SIGHUP) { // under nohup it stays ignored
		signal.Notify(sig, syscall.SIGHUP)
	}
	defer signal.Stop(sig)
	var fsys *fusefs.FS
	store, err := versionstore.Open(backing, filepath.Join(o.StateDir, "index.db"), versionstore.Options{
		Umask:      &umask,
		AliasRoots: []string{mnt},
		OnPublish:  func(key string) { fsys.Invalidate(key) },
		Logger:     log,

		CaptureMaxBytes: o.KeepMax,
		RetainBytes:     o.RetainBytes,
		RetainAge:       o.RetainAge,
	})
	if err != nil {
		return err
	}
	defer store.Close()
	fsys, err = fusefs.Mount(mnt, store, fusefs.Options{AllowOther: o.AllowOther, CacheTimeout: o.CacheTimeout, Debug: o.Debug, Logger: log})
	if err != nil {
		return err
	}
	socket, stopServing, err := serveSocket(store, o, backing, mnt, log)
	if err != nil {
		fsys.Unmount()
		return err
	}
	defer stopServing()
	os.Remove(filepath.Join(o.StateDir, unmountErrorFile))
	log.Info("mounted", "backing", backing, "mountpoint", mnt, "state", o.StateDir, "socket", socket, "open_file_limit", fileLimit)
	if !ready.report(nil) {
		fmt.Fprintf(os.Stderr, "dshfs: %s mounted at %s, tools on %s (Ctrl-C to unmount)\n", backing, mnt, socket)
	}

	done := make(chan struct{})
	go func() { fsys.Wait(); close(done) }()
	select {
	case s := <-sig:
		log.Info("unmounting", "signal", s.String())
		if err := fsys.Unmount(); err != nil {
			// For `dshfs unmount`, which waits for this process to end.
			os.WriteFile(filepath.Join(o.StateDir, unmountErrorFile), []byte(err.Error()+"\n"), 0o600)
			return err
		}
	case <-done:
		log.Info("unmounted from outside")
	}
	return nil
}

// unmountErrorFile, in the state directory, says why the last unmount on a
// signal failed.
const unmountErrorFile = "unmount-error"

// recoverStaleMount detaches a FUSE mount whose daemon died: the kernel
// answers ENOTCONN for it, and nothing can be mounted over it until it goes.
func recoverStaleMount(mnt string) error {
	// statfs always asks the filesystem; a stat of the mount point may be
	// answered from the kernel's cache of a dead mount.
	var st syscall.Statfs_t
	err := syscall.Statfs(mnt, &st)
	if !errors.Is(err, syscall.ENOTCONN) {
		if err != nil {
			return fmt.Errorf("mount point: %w", err)
		}
		return nil
	}
	if err := detachMount(mnt); err != nil {
		return fmt.Errorf("mount point %s is a dead mount and could not be detached: %w", mnt, err)
	}
	return nil
}

// notMounted refuses a mount point that already has a filesystem mounted
// on it (a running dshfs, say): a second mount would hide the first, whose
// tools would then change files nobody sees, and whose unmount would hang.
// Only a FUSE filesystem's root is refused: the root of a tmpfs or another
// disk is a fine place to mount on.
func notMounted(mnt string) error {
	var st, parent syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	if err := syscall.Stat(filepath.Dir(mnt), &parent); err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	var fsst syscall.Statfs_t
	if err := syscall.Statfs(mnt, &fsst); err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	if st.Dev != parent.Dev && mnt != filepath.Dir(mnt) && isFuse(&fsst) {
		return fmt.Errorf("mount point %s is already a mount point (a FUSE filesystem); unmount it first", mnt)
	}
	return nil
}
