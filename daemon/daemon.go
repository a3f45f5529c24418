// Package daemon owns a running mount: checking the mount point, opening
// the workspace's store, mounting it (fusefs), serving its tools on the
// socket in the state directory (unixsocket, mcptools), unmounting on a
// signal, and starting itself detached; and the workspace's branches, each
// a private view and an ordinary mount over it (branches.go), with the git
// commands their merges run, isolated from any repository's configuration
// (git check-ignore, branchignore.go; git merge-file, linemerge.go). It
// also owns the mount registry — how any process finds the daemon of a
// running mount (registry.go) —, where a workspace's state directory is
// (statedir.go), and the lock by which one daemon at a time versions a
// backing directory (backinglock.go).
//
// A daemon runs from a Config and nothing else: the detached daemon
// receives its parent's Config whole (detach.go). The package knows
// nothing of the CLI and prints little (the foreground daemon's "mounted"
// line, a state directory moved from its old name): its errors are plain
// sentences, the registry's wrapping ErrNoMount or ErrUnreachable, that
// the CLI turns into exit statuses.
package daemon

import (
	"time"

	"github.com/dshfs/dshfs/fusefs"
)

// Config is everything a daemon runs with. A detached daemon is handed its
// parent's Config as JSON (detach.go), so a field added here reaches it
// with no more code; TestStartCarriesEveryConfigField holds that.
type Config struct {
	Backing    string // the backing directory's real path (BackingDir)
	MountPoint string // the mount point's real path (PrepareMountPoint)
	StateDir   string // the index, socket and log; "": DefaultStateDir(Backing)
	// ReplacedDeadMount: a dead mount (its daemon gone) was detached from
	// MountPoint first (PrepareMountPoint), which the log says.
	ReplacedDeadMount bool

	NoPolicy      bool          // serve the bare provider: no read-before-write checks
	AllowOther    bool          // let other users use the mount
	CacheTimeout  time.Duration // how long the kernel caches entries; 0: fusefs decides
	MaxWatches    int           // most directories watched for outside changes; 0: DefaultMaxWatches
	Debug         bool          // log every FUSE request
	NoPassthrough bool          // every read and write through the daemon
	IOUring       bool          // FUSE requests over io_uring where the kernel lets (fusefs.Options)
	Baseline      bool          // index the whole workspace in the background once mounted
	SyncPublishes bool          // sync every tool publish before its commit (versionstore.Options)

	MaxImageBytes int64         // largest file read_image returns
	KeepMaxBytes  int64         // largest file whose bytes are kept
	RetainBytes   int64         // budget for kept bytes
	RetainAge     time.Duration // kept bytes older than this go, unless current or checkpointed
	ForgetActors  time.Duration // forget the observations of actors idle this long

	Remote         string // s3://BUCKET/PREFIX the history is replicated to; "": none
	RemoteTakeover bool   // take the prefix from the dshfs that replicates to it
	// From builds the workspace in the empty backing directory from the
	// history replicated at s3://BUCKET/PREFIX first, as of checkpoint At
	// if set (else its newest version); the history goes on at Remote, at
	// From if Remote is "".
	From, At string

	Version string // the build, as the mount's record and MCP sessions name it
	Branch  string // the branch a branch's mount serves (branches.go); "": a workspace
}

// Observations of actors idle DefaultForgetActors are forgotten (a
// forgotten actor reads again before it edits); past maxActors actors, the
// least recently active are.
const (
	DefaultForgetActors = 7 * 24 * time.Hour
	// DefaultMaxWatches caps a mount's inotify watches (fusefs.Options).
	DefaultMaxWatches = fusefs.DefaultMaxWatches
	maxActors         = 10_000
)
