package main

import (
	"fmt"
	"path/filepath"

	"github.com/dshfs/dshfs/daemon"
	"github.com/dshfs/dshfs/internal/quote"
	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/dshfs/dshfs/versionstore/remote"
	"github.com/urfave/cli/v2"
)

// mountOptions are the flags of `dshfs mount`: the daemon's Config, and
// what is decided before a daemon starts.
type mountOptions struct {
	daemon.Config
	Foreground bool
	NonEmpty   bool // mount over a mount point that holds files
	Detached   bool // this process is the daemon a `dshfs mount` started
}

// detachedArgs make this program the detached daemon (daemon.Start).
var detachedArgs = []string{"mount", "--detached"}

func mountCommand() *cli.Command {
	var o mountOptions
	return &cli.Command{
		Name:      "mount",
		Usage:     "mount a versioned view of BACKING at MOUNTPOINT",
		ArgsUsage: "BACKING MOUNTPOINT",
		Description: "Every write through the mount gets a content-hash version, attributed to the writing process.\n" +
			"SIGINT or SIGTERM flushes the index and unmounts cleanly. A mount left behind by a crash is\n" +
			"detected and replaced. The mount point must be outside the backing directory; a missing one is\n" +
			"made, a non-empty one refused (--nonempty mounts over what it holds, hiding it). As root on Linux,\n" +
			"a directory mounted already is shown at the new mount point too: a bind mount served by the same\n" +
			"daemon, taking no options of its own (dshfs unmount of it leaves the first); otherwise a second\n" +
			"mount of it is refused.\n\n" +
			"As a normal user, mounting needs fusermount3 (Debian: apt-get install fuse3) and read-write\n" +
			"access to /dev/fuse; --allow-other also needs user_allow_other in /etc/fuse.conf.",
		Flags: mountFlags(&o),
		Action: func(c *cli.Context) error {
			if o.Detached {
				return runDetached()
			}
			if c.NArg() != 2 {
				return cli.Exit("mount takes BACKING and MOUNTPOINT", exitUsage)
			}
			if done, err := mountSecond(c, c.Args().Get(0), c.Args().Get(1)); done {
				return err
			}
			return runMount(o, c.Args().Get(0), c.Args().Get(1))
		},
	}
}

// runMount checks the flags, the backing directory and the mount point,
// then serves the mount here (--foreground) or in a detached daemon. A
// backing directory the user's dshfs versions already is refused before
// anything is made; a mount that fails removes the mount point it made.
func runMount(o mountOptions, backing, mountpoint string) error {
	if o.MaxImageBytes <= 0 || o.RetainBytes <= 0 || o.RetainAge <= 0 || o.ForgetActors <= 0 || o.CacheTimeout < 0 || o.MaxWatches <= 0 {
		return cli.Exit("--max-image-bytes, --retain-bytes, --retain-age, --forget-actors-after and --max-watches must be positive", exitUsage)
	}
	var err error
	if o.Backing, err = daemon.BackingDir(backing); err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	if err := daemon.CheckBacking(o.Backing, realPath(mountpoint)); err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	if err := checkFrom(o); err != nil {
		return err
	}
	mp, err := prepareMountPoint(o.Backing, mountpoint, o.NonEmpty)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	o.MountPoint, o.ReplacedDeadMount = mp.Path, mp.Replaced
	o.Version = buildVersion()
	if o.Foreground {
		sayMade(mp)
		err = serve(o.Config, nil)
	} else {
		err = startDaemon(o.Config, mp)
	}
	if err != nil {
		mp.Unmake()
	}
	return err
}

// checkFrom refuses --at without --from, and --from into a backing
// directory that holds files.
func checkFrom(o mountOptions) error {
	if o.From == "" {
		if o.At != "" {
			return cli.Exit("--at names a checkpoint of the history --from resumes; give --from s3://BUCKET/PREFIX too", exitUsage)
		}
		return nil
	}
	if _, err := remote.ParseLocation(o.From); err != nil {
		return cli.Exit(err.Error()+"; give --from s3://BUCKET/PREFIX", exitUsage)
	}
	if err := daemon.CheckResumeBacking(o.Backing); err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	return nil
}

// prepareMountPoint is daemon.PrepareMountPoint, saying when it replaced a
// dead mount.
func prepareMountPoint(backing, mountpoint string, nonempty bool) (daemon.MountPoint, error) {
	mp, err := daemon.PrepareMountPoint(backing, mountpoint, nonempty)
	if mp.Replaced {
		fmt.Printf("dshfs: replaced the dead mount at %s (its daemon had exited without unmounting)\n", quote.Name(mp.Path))
	}
	return mp, err
}

// sayMade says that the mount point was made, once the mount stands on it
// (or, in the foreground, is about to).
func sayMade(mp daemon.MountPoint) {
	if len(mp.Made) > 0 {
		fmt.Printf("dshfs: made the mount point %s\n", quote.Name(mp.Made[0]))
	}
}

// startDaemon starts the daemon detached, and says where it runs.
func startDaemon(cfg daemon.Config, mp daemon.MountPoint) error {
	d, err := daemon.Start(cfg, detachedArgs)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	sayMade(mp)
	fmt.Printf("dshfs: mounted %s at %s (pid %d, log %s)\n", quote.Name(cfg.Backing), quote.Name(cfg.MountPoint), d.Pid, quote.Name(d.Log))
	return nil
}

// runDetached is the daemon a `dshfs mount` started: it serves the Config
// its parent sent.
func runDetached() error {
	cfg, ready, err := daemon.FromParent()
	if err != nil {
		ready.Report(err)
		return cli.Exit(err.Error(), exitFailure)
	}
	return serve(cfg, ready)
}

// serve runs the daemon in this process until it is unmounted.
func serve(cfg daemon.Config, ready *daemon.Ready) error {
	if err := daemon.Run(cfg, ready); err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	return nil
}

func mountFlags(o *mountOptions) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "foreground", Usage: "stay attached instead of returning once mounted", Destination: &o.Foreground},
		&cli.BoolFlag{Name: "detached", Hidden: true, Destination: &o.Detached},
		&cli.StringFlag{Name: "state", Usage: "state directory holding the index and the socket", DefaultText: "<workspace name>-<hash> in $XDG_STATE_HOME/dshfs", Destination: &o.StateDir},
		&cli.BoolFlag{Name: "nonempty", Usage: "mount over a mount point that holds files (the mount hides them)", Destination: &o.NonEmpty},
		&cli.BoolFlag{Name: "no-policy", Usage: "serve the bare provider: no read-before-write checks", Destination: &o.NoPolicy},
		&cli.BoolFlag{Name: "allow-other", Usage: "let other users use the mount (non-root needs user_allow_other in /etc/fuse.conf)", Destination: &o.AllowOther},
		&cli.DurationFlag{Name: "cache-timeout", Usage: "how long the kernel may cache entries and attributes", DefaultText: "30s while the backing tree can be watched, else 1s", Destination: &o.CacheTimeout},
		&cli.IntFlag{Name: "max-watches", Usage: "most directories of the backing tree watched for outside changes (inotify, charged to the daemon's user); in the others, entries and attributes are cached for 1s", Value: daemon.DefaultMaxWatches, Destination: &o.MaxWatches},
		&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request", Destination: &o.Debug},
		&cli.BoolFlag{Name: "no-passthrough", Usage: "send every read and write through the daemon; by default the kernel reads and writes the backing files itself where it can (Linux 6.9+, as root)", Destination: &o.NoPassthrough},
		&cli.BoolFlag{Name: "io-uring", Usage: "carry FUSE requests over io_uring, one queue a CPU (Linux 6.14+ with CONFIG_FUSE_IO_URING, as root); if the fuse module's enable_uring is off, switches it on for the whole machine (every FUSE server may then use io_uring) and leaves it on after the daemon ends (echo 0 > /sys/module/fuse/parameters/enable_uring switches it back, once no mount uses io_uring); where the kernel will not, /dev/fuse carries them and status says why", Destination: &o.IOUring},
		&cli.BoolFlag{Name: "sync-publishes", Usage: "sync every tool write's file and directory before acknowledging it, so the backing directory is current after a power cut even before dshfs starts again on it (by default small writes are durable in the index first and put back at the next start; this costs two more syncs a write)", Destination: &o.SyncPublishes},
		&cli.BoolFlag{Name: "baseline", Usage: "once mounted, index the whole workspace in the background and keep every file's bytes, as the first checkpoint does", Destination: &o.Baseline},
		&cli.Int64Flag{Name: "keep-max-bytes", Usage: "largest file whose versions' bytes are kept; -1 keeps none", Value: versionstore.DefaultCaptureMaxBytes, DefaultText: humanBytes(versionstore.DefaultCaptureMaxBytes), Destination: &o.KeepMaxBytes},
		&cli.Int64Flag{Name: "retain-bytes", Usage: "budget for kept bytes", Value: versionstore.DefaultRetainBytes, DefaultText: humanBytes(versionstore.DefaultRetainBytes), Destination: &o.RetainBytes},
		&cli.DurationFlag{Name: "retain-age", Usage: "drop kept bytes older than this, unless current or checkpointed", Value: versionstore.DefaultRetainAge, Destination: &o.RetainAge},
		&cli.DurationFlag{Name: "forget-actors-after", Usage: "forget what an actor observed once it has been idle this long (it reads again before editing)", Value: daemon.DefaultForgetActors, Destination: &o.ForgetActors},
		&cli.StringFlag{Name: "remote", Usage: "replicate the history (every kept version, the journal, the checkpoints) to s3://BUCKET/PREFIX; endpoint and credentials come from the AWS configuration (AWS_ENDPOINT_URL_S3, AWS_PROFILE, ...)", Destination: &o.Remote},
		&cli.StringFlag{Name: "from", Usage: "first build the workspace in the empty BACKING from the history replicated at s3://BUCKET/PREFIX (its files, modes, directories and symlinks as of its newest version), import that history, and go on with it there (fencing the dshfs that replicated it) or at --remote", Destination: &o.From},
		&cli.StringFlag{Name: "at", Usage: "with --from: rewind the workspace built to this checkpoint of the history", Destination: &o.At},
		&cli.BoolFlag{Name: "remote-takeover", Usage: "replicate to --remote's prefix even though another dshfs does, stopping that one's replication", Destination: &o.RemoteTakeover},
		&cli.Int64Flag{Name: "max-image-bytes", Usage: "largest file read_image returns", Value: toolapi.DefaultMaxImageBytes, DefaultText: humanBytes(toolapi.DefaultMaxImageBytes), Destination: &o.MaxImageBytes},
	}
}

// realPath is path made absolute with its parent's symbolic links
// resolved, as the mount table names a mount point. The last element is
// not looked at: a look at a mount there holds it for a moment, which
// makes the kernel refuse an unmount of it under way (EBUSY).
func realPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(r, filepath.Base(abs))
	}
	return abs
}
