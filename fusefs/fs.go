// Package fusefs owns the FUSE view of the workspace: a go-fuse node tree over
// the backing directory in which every mutating operation — write, truncate,
// fallocate, copy_file_range, create, mknod, link, rename, unlink — takes the
// file's versionstore lock, and whose version is committed when a writer
// flushes or fsyncs after writing and when the last one releases,
// attributed to the calling process. Where it may, the kernel reads and
// writes the backing files itself (passthrough_linux.go): the daemon then
// sees every open, fsync and release but no write, and commits at fsync and
// at the last writer's release, following a shared mapping that outlives
// its close until it is gone (mapped.go). It owns which files are being
// written through the mount (writers.go), which the store asks before a tool
// may replace one, and the clearing of set-id bits the kernel leaves to it
// (killpriv.go). Tool writes published behind the kernel's back are
// invalidated in the kernel's caches at once. POSIX ACLs are the backing
// files' own, enforced by the kernel; the daemon applies a creator's umask
// where no default ACL rules instead (acl.go). It also owns a branch's
// private view (branchview.go): the union of the branch's own files over a
// snapshot of the workspace, copy-up, whiteouts, and which of its files are
// open for writing.
//
// It works on directory file descriptors (*at system calls), never on
// absolute backing paths, so paths near PATH_MAX work. syscall.Errno appears
// in this package only; it never decides what a tool may do (toolapi and
// policy do) and never writes the index except through versionstore.
package fusefs

import (
	"cmp"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Options configure a mount. The zero value is usable.
type Options struct {
	// CacheTimeout is how long the kernel may trust entries and attributes.
	// Every change made through the mount or by the tools is invalidated
	// explicitly, and so are changes made straight into the backing
	// directory while it can be watched (inotify): then the default is 30s,
	// otherwise 1s, which bounds how long such a change can go unseen.
	CacheTimeout time.Duration
	// MaxWatches caps the inotify watches the mount takes, one a directory
	// of the backing tree (default DefaultMaxWatches). They are charged to
	// the daemon's user, machine-wide, and anyone who may make directories
	// through the mount makes more; directories beyond the cap are not
	// watched, and the kernel trusts what it caches from them for 1 s.
	MaxWatches int
	// NoWatch leaves the backing tree unwatched: for a backing tree only
	// the mount changes (a branch's view).
	NoWatch bool
	// AllowOther lets other users use the mount (FUSE allow_other).
	AllowOther bool
	// NoPassthrough keeps every read and write going through the daemon.
	// Otherwise the kernel reads and writes the backing files itself
	// (passthrough) wherever the daemon may let it: Linux 6.9 or later, a
	// daemon with CAP_SYS_ADMIN, a backing filesystem that takes backing
	// files and read leases. See passthrough_linux.go.
	NoPassthrough bool
	// IOUring serves requests over io_uring (Linux 6.14+, a root daemon;
	// uring_linux.go), switching on the fuse module's enable_uring for the
	// machine if it is off. Where the kernel will not, the mount is served
	// over /dev/fuse, and Transport says why.
	IOUring bool
	// Debug logs every FUSE request, to DebugLog if set.
	Debug    bool
	DebugLog *log.Logger
	// Logger receives failures that cannot be returned to a caller
	// (default slog.Default()).
	Logger *slog.Logger

	// afterMake, for tests, runs when the daemon has made a directory,
	// node or symlink, before it gives it to the caller.
	afterMake func(dirfd int, name string)
	// afterServe, for tests, runs once the daemon serves the mount at mnt,
	// before the mount is ready.
	afterServe func(mnt string)
	// uringRefused, for tests, makes the io_uring transport fail after
	// INIT, as when it cannot register its queues.
	uringRefused bool
	// selfWindow, for tests, replaces the watcher's own-change window
	// (see watch_linux.go).
	selfWindow time.Duration
	// DaemonInfo, if set, is the value of the extended attribute
	// DaemonInfoXattr on the mount's root: what a client reads to find the
	// daemon serving this mount (its socket), whatever its $HOME or user.
	// It is answered from memory, never listed, stored or changed.
	DaemonInfo []byte
}

// DefaultMaxWatches is a mount's cap on inotify watches: a tree of more
// directories is watched in part. Each watch costs about 1 KiB of kernel
// memory, charged to the daemon's user, whose machine-wide limit
// (fs.inotify.max_user_watches) is commonly 8,192 to 1,048,576.
const DefaultMaxWatches = 8192

// DaemonInfoXattr names the mount root's attribute holding Options.DaemonInfo.
const DaemonInfoXattr = "user.dshfs.daemon"

// FS is a mounted workspace.
type FS struct {
	store  *versionstore.Store
	mount  *versionstore.Mount // the store's side for the mount alone
	rootFd int                 // O_PATH descriptor of the backing directory
	root   *node
	server *fuse.Server
	mnt    string
	// writers are the files being written through the mount (writers.go).
	writers *writers
	log     *slog.Logger
	watch   *watcher // nil when the backing tree is not watched

	actors *Actors // who the processes writing through the mount act for

	timeout time.Duration // how long the kernel may trust entries and attributes

	// passthrough says whether opens are passthrough. It is decided once
	// (probe), by the first request that needs to know or else right after
	// mounting, and read only through Passthrough.
	ptWanted    bool // asked for and allowed: CAP_PASSTHROUGH negotiated
	probeOnce   sync.Once
	passthrough bool
	backingLost atomic.Bool // see backingCheck

	uring    *uringTransport // nil: /dev/fuse serves every request
	uringWhy string          // why not io_uring, when it was asked for

	afterMake  func(dirfd int, name string) // Options.afterMake
	selfWindow time.Duration                // Options.selfWindow, or the default
	info       []byte                       // the root's DaemonInfoXattr
	inFlight   inFlight                     // what aclRequests keeps of requests (acl.go)
}

// Mount serves store's workspace at mountpoint. The process umask should be
// 0: the caller's umask is applied by the kernel or, where a parent's
// default ACL may rule instead, by the daemon (acl.go); see the design
// contract.
func Mount(mountpoint string, store *versionstore.Store, opts Options) (*FS, error) {
	mnt, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	if err := checkMountpoint(store.Root(), mnt); err != nil {
		return nil, err
	}
	rootFd, err := unix.Open(store.Root(), oPath|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	f := &FS{store: store, rootFd: rootFd, mnt: mnt, log: opts.Logger, afterMake: opts.afterMake, actors: &Actors{}, info: opts.DaemonInfo,
		writers: newWriters(nil)}
	f.selfWindow = cmp.Or(opts.selfWindow, selfWindow)
	f.mount = store.AttachMount(f.writers)
	f.writers.locks = f.mount.Locks()
	if f.log == nil {
		f.log = slog.Default()
	}
	f.root = &node{fsys: f}
	if opts.NoWatch {
		// Nothing changes the backing tree but the mount.
	} else if f.watch, err = startWatcher(f, cmp.Or(opts.MaxWatches, DefaultMaxWatches)); err != nil {
		f.log.Warn("not watching the backing directory; outside changes show within the cache timeout", "err", err)
	}
	timeout := opts.CacheTimeout
	switch {
	case timeout > 0:
	case f.watch != nil:
		timeout = 30 * time.Second
	default:
		timeout = time.Second
	}
	f.timeout = timeout
	fopts := &fs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		NullPermissions: true,
	}
	fopts.MountOptions = fuse.MountOptions{
		FsName:      store.Root(), // the source column of the mount table: status finds it there
		Name:        "dshfs",
		AllowOther:  opts.AllowOther,
		Options:     []string{"default_permissions"},
		DirectMount: os.Geteuid() == 0,
		MaxWrite:    1 << 20,
		Debug:       opts.Debug,
		Logger:      opts.DebugLog,
		// Byte-range and flock locks are the kernel's, as on a local
		// filesystem: it knows each lock's owner (a process, an open
		// file description), which the daemon, locking its own
		// descriptors, does not. Locks taken in the backing directory
		// directly do not show through the mount, nor the other way.
		EnableLocks:   false,
		DisableXAttrs: false,
		// The daemon clears set-id bits itself (killpriv.go): the kernel
		// then skips a GETATTR on every chown, and a GETXATTR on all but
		// a file's first write after its attributes were refreshed.
		ExtraCapabilities: capHandleKillpriv | aclCaps,
		// POSIX ACLs are enforced by the kernel, and a parent's default
		// ACL rules a new entry's permissions, not the umask (acl.go).
		EnableAcl: true,
		// ATOMIC_O_TRUNC is deliberately not negotiated: without a
		// writeback cache or passthrough the kernel does not serialize a
		// truncating OPEN against concurrent O_APPEND writes, which then
		// land past the new end and leave holes; and whether passthrough
		// works is known only once the connection is up, after the
		// capabilities were agreed. A SETATTR truncation runs under the
		// inode lock; the open handle it follows keeps it from committing
		// an empty version.
	}
	pt := !opts.NoPassthrough && passthroughPossible()
	if !pt {
		fopts.MountOptions.DisabledCapabilities = fuse.CAP_PASSTHROUGH
	}
	raw := fuse.RawFileSystem(uncachedAttrs{aclRequests{fs.NewNodeFS(f.root, fopts), f}})
	if pt {
		raw = backingCheck{raw, f}
	}
	if zeroMessageOpendir {
		raw = dirStreams{raw}
	}
	f.ptWanted = pt
	if opts.IOUring {
		raw = f.withURing(raw, &fopts.MountOptions, opts.uringRefused)
	}
	if err := f.serve(raw, &fopts.MountOptions, opts.afterServe); err != nil {
		f.watch.close()
		unix.Close(rootFd)
		if f.uring != nil {
			f.uring.wait()
		}
		return nil, mountError(err)
	}
	f.Passthrough() // decided now if no request has decided it yet
	f.watch.start()
	return f, nil
}

// serve mounts raw at f.mnt and serves it until unmounted. Requests may
// arrive before it returns: go-fuse's WaitMount looks a name up in the
// mount's root, which waits for a create in the root to be answered.
func (f *FS) serve(raw fuse.RawFileSystem, opts *fuse.MountOptions, afterServe func(string)) error {
	server, err := fuse.NewServer(raw, f.mnt, opts)
	if err != nil {
		return err
	}
	f.server = server
	if f.uring != nil {
		f.uring.goServe()
	}
	go server.Serve()
	if afterServe != nil {
		afterServe(f.mnt)
	}
	if err := server.WaitMount(); err != nil {
		server.Unmount()
		return err
	}
	return nil
}

// probe decides whether opens are passthrough: they are if they may be and
// a backing file registers on this connection (passthrough_linux.go). It
// runs in a request or after WaitMount, so the connection is initialized.
func (f *FS) probe() {
	if !f.ptWanted {
		return
	}
	if err := probePassthrough(f.server, f.rootFd); err != nil {
		f.log.Warn("kernel passthrough is unavailable: every read and write goes through the daemon", "err", err)
		return
	}
	f.passthrough = true
}

// checkMountpoint refuses a mount point inside the backing directory: the
// daemon would look up its own mount while serving it and deadlock.
func checkMountpoint(backing, mnt string) error {
	real := mnt
	if r, err := filepath.EvalSymlinks(mnt); err == nil {
		real = r
	}
	for _, m := range []string{mnt, real} {
		if rel, err := filepath.Rel(backing, m); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return fmt.Errorf("mount point %s is inside the backing directory %s; choose a mount point outside it", mnt, backing)
		}
	}
	return nil
}

func mountError(err error) error {
	if errors.Is(err, os.ErrNotExist) && strings.Contains(err.Error(), "fusermount") {
		return fmt.Errorf("mount: %w (install fuse3, which provides fusermount3, or run as root)", err)
	}
	return fmt.Errorf("mount: %w", err)
}

// Passthrough reports whether the kernel reads and writes the mount's files
// itself (passthrough_linux.go).
func (f *FS) Passthrough() bool {
	f.probeOnce.Do(f.probe)
	return f.passthrough
}

// withURing sets up the io_uring queues and has raw start them once INIT is
// answered; without them it returns raw and records why.
func (f *FS) withURing(raw fuse.RawFileSystem, opts *fuse.MountOptions, refused bool) fuse.RawFileSystem {
	t, why := newURing(opts.MaxWrite, f.log)
	if t == nil {
		f.uringWhy = why
		f.log.Warn("serving over /dev/fuse, not io_uring", "why", why)
		return raw
	}
	f.uring = t
	t.refused = refused
	opts.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
	return uringInit{RawFileSystem: raw, t: t, opts: opts}
}

// Transport names what carries the mount's requests, "io_uring" or
// "/dev/fuse", and, when io_uring was asked for and does not, why.
func (f *FS) Transport() (name, why string) {
	if f.uring != nil {
		if why := f.uring.Why(); why != "" {
			return "/dev/fuse", why
		}
		return "io_uring", ""
	}
	return "/dev/fuse", f.uringWhy
}

// Actors is the registry of processes acting for actors: their writes
// through the mount, and their descendants', are recorded as the actor's.
func (f *FS) Actors() *Actors { return f.actors }

// Wait blocks until the filesystem is unmounted.
func (f *FS) Wait() { f.server.Wait() }

// ErrStillInUse is Unmount's error when processes kept using the mount
// after it was detached: they are stranded once the daemon exits.
var ErrStillInUse = errors.New("detached, but still in use")

// Unmount unmounts, retrying while the mount is busy and detaching it
// lazily if it stays busy, then releases the backing directory.
func (f *FS) Unmount() error {
	f.unmountOthers()
	var err error
	for range 10 {
		if err = f.server.Unmount(); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		if derr := detach(f.mnt); derr != nil {
			return fmt.Errorf("unmount %s: %w", f.mnt, err)
		}
	}
	// A lazily detached mount is served until its last user lets go; do
	// not wait for that forever (the process exiting ends it).
	served := make(chan struct{})
	go func() { f.server.Wait(); close(served) }()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("unmount %s: %w", f.mnt, ErrStillInUse)
	}
	f.release()
	return nil
}

// release lets go of what the mount held, once the kernel no longer sends
// it requests.
func (f *FS) release() {
	drained := f.uring == nil || f.uring.wait()
	f.endMappings()
	f.watch.close()
	if !drained {
		// A request a ring still serves may act on rootFd: closed, its
		// number could be a new descriptor's by then. It stays open until
		// the process ends. The store the caller closes next is safe: its
		// descriptors are os.Files, closed once no call uses them, and a
		// closed index refuses what such a request asks afterwards.
		f.log.Warn("io_uring queues still serving a request after the mount ended; the backing directory's descriptor is left open", "mountpoint", f.mnt)
		return
	}
	unix.Close(f.rootFd)
}

// Invalidate drops what the kernel caches for the workspace path key —
// its directory entry, attributes and pages — so the next access through
// the mount sees bytes the tools published behind the kernel's back. It
// must not be called under a filesystem lock.
func (f *FS) Invalidate(key string) {
	dir, name := path.Split(key)
	parent := f.root.EmbeddedInode()
	for _, c := range splitKey(dir) {
		if parent = parent.GetChild(c); parent == nil {
			return // the kernel has nothing cached below here
		}
	}
	if child := parent.GetChild(name); child != nil {
		child.NotifyContent(0, 0)
	}
	parent.NotifyEntry(name)
}

// invalidateOutside drops what the kernel caches for dir/name after a change
// made straight into the backing tree: the file's attributes and pages, and
// for a name that appeared, vanished or moved, the entry and the directory's
// attributes. The directory's cached listing goes with its attributes: the
// kernel checks the directory's mtime and version before it lists from the
// cache, and starts the listing over when either changed. Its pages are
// kept: the kernel adds to a listing it is caching only at the end of what
// it has, so pages dropped while it fills them would leave the listing
// half cached, and every later listing would go to the daemon. It runs on
// the watcher's goroutine, under no lock.
func (f *FS) invalidateOutside(dir, name string, entry bool) {
	parent := f.root.EmbeddedInode()
	for _, c := range splitKey(dir) {
		if parent = parent.GetChild(c); parent == nil {
			return
		}
	}
	if child := parent.GetChild(name); child != nil {
		child.NotifyContent(0, 0)
	}
	if entry {
		parent.NotifyEntry(name)
		parent.NotifyContent(-1, 0)
	}
}

func splitKey(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// toErrno converts an error from the backing filesystem to the errno the
// kernel expects. go-fuse's own converter does not unwrap wrapped errors
// (a wrapped ENOENT would become ENOSYS), so this one does.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, os.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, os.ErrPermission):
		return syscall.EACCES
	}
	return syscall.EIO
}
