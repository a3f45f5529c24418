package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/urfave/cli/v2"
)

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

// mountOptions are the flags of `dshfs mount`.
type mountOptions struct {
	Backing       string
	Mountpoint    string
	StateDir      string
	Foreground    bool
	ReadyFd       int // set in the detached daemon: where to report readiness
	NoPolicy      bool
	NonEmpty      bool // mount over a mount point that holds files
	AllowOther    bool
	CacheTimeout  time.Duration
	Debug         bool
	NoPassthrough bool  // every read and write through the daemon
	MaxImageSize  int64 // bytes; 0: the reference's 3.5 MiB
	KeepMax       int64 // largest file whose bytes are kept; 0: 64 MiB
	RetainBytes   int64
	RetainAge     time.Duration
	ForgetActors  time.Duration // forget the observations of actors idle this long
	Baseline      bool          // index the whole workspace in the background once mounted
}

// Observations of actors idle this long are forgotten (a forgotten actor
// reads again before it edits); past maxActors actors, the least recently
// active are.
const (
	defaultForgetActors = 7 * 24 * time.Hour
	maxActors           = 10_000
)

func mountCommand() *cli.Command {
	var o mountOptions
	return &cli.Command{
		Name:      "mount",
		Usage:     "mount a versioned view of BACKING at MOUNTPOINT",
		ArgsUsage: "BACKING MOUNTPOINT",
		Description: "Every write through the mount gets a content-hash version, attributed to the writing process.\n" +
			"SIGINT or SIGTERM flushes the index and unmounts cleanly. A mount left behind by a crash is\n" +
			"detected and replaced. The mount point must be outside the backing directory; a missing one is\n" +
			"made, a non-empty one refused (--nonempty mounts over what it holds, hiding it).\n\n" +
			"As a normal user, mounting needs fusermount3 (Debian: apt-get install fuse3) and read-write\n" +
			"access to /dev/fuse; --allow-other also needs user_allow_other in /etc/fuse.conf.",
		Flags: mountFlags(&o),
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cli.Exit("mount takes BACKING and MOUNTPOINT", exitUsage)
			}
			if o.MaxImageSize <= 0 || o.RetainBytes <= 0 || o.RetainAge <= 0 || o.ForgetActors <= 0 || o.CacheTimeout < 0 {
				return cli.Exit("--max-image-bytes, --retain-bytes, --retain-age and --forget-actors-after must be positive", exitUsage)
			}
			var err error
			if o.Backing, err = backingDir(c.Args().Get(0)); err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			if o.Mountpoint, err = prepareMountpoint(o.Backing, c.Args().Get(1), o.NonEmpty); err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			if !o.Foreground {
				return daemonize(o, c.App.Name)
			}
			ready := openReadyPipe(o.ReadyFd)
			if err := runMount(o, ready); err != nil {
				ready.report(err) // the waiting parent prints it, unless it was told "ok"
				return cli.Exit(err.Error(), exitFailure)
			}
			return nil
		},
	}
}

func mountFlags(o *mountOptions) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "foreground", Usage: "stay attached instead of returning once mounted", Destination: &o.Foreground},
		&cli.IntFlag{Name: "ready-fd", Hidden: true, Destination: &o.ReadyFd},
		&cli.StringFlag{Name: "state", Usage: "state directory holding the index and the socket", DefaultText: "<workspace name>-<hash> in $XDG_STATE_HOME/dshfs", Destination: &o.StateDir},
		&cli.BoolFlag{Name: "nonempty", Usage: "mount over a mount point that holds files (the mount hides them)", Destination: &o.NonEmpty},
		&cli.BoolFlag{Name: "no-policy", Usage: "serve the bare provider: no read-before-write checks", Destination: &o.NoPolicy},
		&cli.BoolFlag{Name: "allow-other", Usage: "let other users use the mount (non-root needs user_allow_other in /etc/fuse.conf)", Destination: &o.AllowOther},
		&cli.DurationFlag{Name: "cache-timeout", Usage: "how long the kernel may cache entries and attributes", DefaultText: "30s while the backing tree can be watched, else 1s", Destination: &o.CacheTimeout},
		&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request", Destination: &o.Debug},
		&cli.BoolFlag{Name: "no-passthrough", Usage: "send every read and write through the daemon; by default the kernel reads and writes the backing files itself where it can (Linux 6.9+, as root)", Destination: &o.NoPassthrough},
		&cli.BoolFlag{Name: "baseline", Usage: "once mounted, index the whole workspace in the background and keep every file's bytes, as the first checkpoint does", Destination: &o.Baseline},
		&cli.Int64Flag{Name: "keep-max-bytes", Usage: "largest file whose versions' bytes are kept; -1 keeps none", Value: versionstore.DefaultCaptureMaxBytes, DefaultText: humanBytes(versionstore.DefaultCaptureMaxBytes), Destination: &o.KeepMax},
		&cli.Int64Flag{Name: "retain-bytes", Usage: "budget for kept bytes", Value: versionstore.DefaultRetainBytes, DefaultText: humanBytes(versionstore.DefaultRetainBytes), Destination: &o.RetainBytes},
		&cli.DurationFlag{Name: "retain-age", Usage: "drop kept bytes older than this, unless current or checkpointed", Value: versionstore.DefaultRetainAge, Destination: &o.RetainAge},
		&cli.DurationFlag{Name: "forget-actors-after", Usage: "forget what an actor observed once it has been idle this long (it reads again before editing)", Value: defaultForgetActors, Destination: &o.ForgetActors},
		&cli.Int64Flag{Name: "max-image-bytes", Usage: "largest file read_image returns", Value: toolapi.DefaultMaxImageBytes, DefaultText: humanBytes(toolapi.DefaultMaxImageBytes), Destination: &o.MaxImageSize},
	}
}

// backingDir is the real path of the backing directory: the mount is
// registered, and found by the CLI, under it.
func backingDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("backing directory %s is not a directory; make it first (mkdir -p %s)", dir, dir)
	}
	return abs, nil
}

func runMount(o mountOptions, ready *readyPipe) error {
	backing, mnt := o.Backing, o.Mountpoint
	var err error
	oneProcessor()
	if o.StateDir == "" {
		if o.StateDir, err = defaultStateDir(backing); err != nil {
			return err
		}
	}
	if o.StateDir, err = filepath.Abs(o.StateDir); err != nil { // clients anywhere read it from the record
		return err
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
	logged := logSize(o.StateDir)
	fsys, err = fusefs.Mount(mnt, store, fusefs.Options{AllowOther: o.AllowOther, CacheTimeout: o.CacheTimeout, Debug: o.Debug, Logger: log, NoPassthrough: o.NoPassthrough,
		DaemonInfo: daemonInfo(o, backing, mnt)})
	if err != nil {
		return explainMountFailure(err, fusermountSaid(o.StateDir, logged), o.AllowOther)
	}
	socket, stopServing, err := serveSocket(store, fsys, o, backing, mnt, log)
	if err != nil {
		fsys.Unmount()
		return err
	}
	defer stopServing()
	defer startBaseline(store, o.Baseline, log)()
	os.Remove(filepath.Join(o.StateDir, unmountErrorFile))
	log.Info("mounted", "backing", backing, "mountpoint", mnt, "state", o.StateDir, "socket", socket, "open_file_limit", fileLimit, "passthrough", fsys.Passthrough())
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
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
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

// prepareMountpoint checks the mount point before anything is mounted on
// it, and returns its real path: a dead mount left there is detached, a
// missing directory is made (and said), and one that is inside the backing
// directory, already a FUSE mount, or (unless nonempty) holds files is
// refused.
func prepareMountpoint(backing, mountpoint string, nonempty bool) (string, error) {
	mnt, err := filepath.Abs(mountpoint)
	if err != nil {
		return "", err
	}
	if within(backing, mnt) {
		return "", fmt.Errorf("mount point %s is inside the backing directory %s; choose a mount point outside it", mnt, backing)
	}
	if err := recoverStaleMount(mnt); err != nil {
		return "", err
	}
	if _, err := os.Lstat(mnt); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			return "", fmt.Errorf("make the mount point: %w", err)
		}
		fmt.Printf("dshfs: made the mount point %s\n", mnt)
	}
	if real, err := filepath.EvalSymlinks(mnt); err == nil {
		mnt = real // registered, and listed by the kernel, under its real path
	}
	if err := notMounted(mnt); err != nil {
		return "", err
	}
	if fi, err := os.Stat(mnt); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("mount point %s is not a directory", mnt)
	}
	if !nonempty {
		return mnt, checkEmpty(mnt)
	}
	return mnt, nil
}

// checkEmpty refuses a mount point that holds files: the mount would hide
// them until it is unmounted.
func checkEmpty(mnt string) error {
	d, err := os.Open(mnt)
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(3)
	if err != nil && err != io.EOF {
		return fmt.Errorf("mount point: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	if len(names) == 3 {
		names[2] = "…"
	}
	return fmt.Errorf("mount point %s is not empty (it holds %s), and the mount would hide what it holds; choose an empty directory, or pass --nonempty to mount over it", mnt, strings.Join(names, ", "))
}

// daemonInfo is the record the mount's root answers (see registry.go).
func daemonInfo(o mountOptions, backing, mnt string) []byte {
	b, _ := json.Marshal(mountRecord{MountPoint: mnt, Backing: backing, Socket: socketPath(o.StateDir), StateDir: o.StateDir,
		Pid: os.Getpid(), UID: os.Geteuid(), Version: buildVersion()})
	return b
}

// logSize is how much the daemon's log holds now (-1 if it has none):
// fusermount3 writes why it failed there, on the daemon's standard error.
func logSize(stateDir string) int64 {
	fi, err := os.Stat(filepath.Join(stateDir, logFileName))
	if err != nil {
		return -1
	}
	return fi.Size()
}

// fusermountSaid returns what fusermount3 wrote to the log since offset.
func fusermountSaid(stateDir string, offset int64) []string {
	if offset < 0 {
		return nil
	}
	f, err := os.Open(filepath.Join(stateDir, logFileName))
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, offset, 64<<10))
	var said []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "fusermount") && !strings.HasPrefix(line, "time=") {
			said = append(said, strings.TrimSpace(line))
		}
	}
	return said
}

// explainMountFailure says why the mount failed in fusermount3's own words
// when it spoke, and how to fix what this machine lacks.
func explainMountFailure(err error, said []string, allowOther bool) error {
	msg := strings.TrimSpace(err.Error())
	if len(said) > 0 {
		msg = "mount failed: " + strings.Join(said, "; ")
	}
	if hint := fuseHint(allowOther); hint != "" {
		msg += "; " + hint
	}
	return errors.New(msg)
}
