package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// One daemon versions a backing directory at a time. Two — at two mount
// points, or one per state directory — would each take the other's writes
// for outside changes: two histories of one tree, and tools that
// compare-and-swap against different versions of it. So a daemon holds an
// exclusive flock on the backing directory itself for its whole life,
// whatever its state directory (the kernel drops it when the process dies:
// a crash leaves nothing to clean up), and dshfs mount checks, before it
// makes anything, that no mount of the user's serves the directory and no
// process of the user's holds its lock.
//
// Only the user's own mounts and processes count. Another user can mount a
// FUSE filesystem naming any source, and flock any directory it may read:
// counting theirs would let anyone keep a user from mounting. The uid in the
// mount table (fusermount3 writes it) and a process's own uid are facts
// another user cannot forge. Another user's daemon on the same tree is
// therefore not refused; the second daemon runs without the lock, and logs
// that it does.

// CheckBacking refuses the backing directory (its real path) if the user's
// dshfs versions it already: a mount of theirs serves it, or a process of
// theirs holds its lock. A holder that serves no mount of it is given time
// to let go: a daemon unmounted from outside (umount, fusermount3 -u) still
// commits its last versions and closes its index before it exits, and a
// mount run right after the unmount (a script's umount; mount) must not be
// refused for that. Another dshfs is given closingGrace (after a second a
// terminal is told what the mount waits for; a script's output is left
// alone); any other process lockGrace. A mount of it at mountPoint itself
// (its real path; "" for none) is given remountGrace to go first: an
// unmount of it may be under way (umount &; mount, as a script or a test
// suite does), and a mount of the same directory at the same place again
// is otherwise the one mistake the refusal below guards against.
func CheckBacking(backing, mountPoint string) error {
	awaitUnmount(backing, mountPoint)
	start := time.Now()
	said := false
	for {
		if e, ok := ownMountOf(backing); ok {
			if e.Err != nil {
				return fmt.Errorf("the backing directory %s is already mounted at %s (%s); unmount it first (dshfs unmount %s)", backing, e.MountPoint, e.Note(), e.MountPoint)
			}
			return fmt.Errorf("the backing directory %s is already mounted at %s by pid %d; use that mount, or unmount it first (dshfs unmount %s)", backing, e.MountPoint, e.Record.Pid, e.MountPoint)
		}
		h, held := ownLockHolder(backing)
		if !held {
			return nil
		}
		closing := h.isDshfs()
		waited := time.Since(start)
		switch {
		case closing && waited > closingGrace:
			return fmt.Errorf("the backing directory %s is still held by pid %d (%s), which serves no mount of it and has not let go in %s; wait for it to exit, or stop it (kill %d)", backing, h.pid, h.comm, closingGrace, h.pid)
		case !closing && waited > lockGrace:
			return fmt.Errorf("the backing directory %s is held by pid %d (%s), which serves no mount of it; stop it first (kill %d)", backing, h.pid, h.comm, h.pid)
		case closing && !said && waited > time.Second && term.IsTerminal(int(os.Stderr.Fd())):
			fmt.Fprintf(os.Stderr, "dshfs: waiting for pid %d (%s), unmounted from %s, to finish closing its index\n", h.pid, h.comm, backing)
			said = true
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitUnmount waits, up to remountGrace, while the mount table shows a
// mount of the user's of backing at mountPoint: an unmount of it may be
// under way. It reads the table alone: a look at the mount itself holds it
// for a moment, which makes the kernel refuse that unmount (EBUSY).
func awaitUnmount(backing, mountPoint string) {
	said := false
	for start := time.Now(); mountPoint != "" && MountedAt(backing, mountPoint) && time.Since(start) < remountGrace; time.Sleep(20 * time.Millisecond) {
		if !said && time.Since(start) > time.Second && term.IsTerminal(int(os.Stderr.Fd())) {
			fmt.Fprintf(os.Stderr, "dshfs: %s is still mounted there; waiting up to %s for an unmount of it\n", mountPoint, remountGrace)
			said = true
		}
	}
}

// MountedAt reports whether the mount table shows a mount of the user's of
// backing at mountPoint, without looking at the mount.
func MountedAt(backing, mountPoint string) bool {
	for _, m := range systemMounts() {
		if m.MountPoint == mountPoint && m.Backing == backing && m.UID == os.Geteuid() {
			return true
		}
	}
	return false
}

// lockGrace is how long CheckBacking waits for a holder of the backing
// directory's lock that serves no mount of it to let go; closingGrace, for
// one that is a dshfs daemon: unmounted, it may still be committing the
// versions of a large write (about a second for 200 MiB) on a busy machine.
const (
	lockGrace    = 2 * time.Second
	closingGrace = 30 * time.Second
	remountGrace = 5 * time.Second
)

// ownLockHolder is a process of the user's that holds the lock on dir.
func ownLockHolder(dir string) (lockHolder, bool) {
	for _, h := range lockHolders(dir) {
		if h.uid == os.Geteuid() {
			return h, true
		}
	}
	return lockHolder{}, false
}

// LiveMountOf is the user's live mount of the backing directory backing
// (its real path), if any: the one a second mount of it would meet.
func LiveMountOf(backing string) (Entry, bool) { return ownMountOf(backing) }

// SecondMountPoint reports whether e is another mount point of the mount
// its record names (a bind mount of it, as `dshfs mount` makes for a
// mounted directory): the mount table gives both one device. Unmounting it
// leaves that mount and its daemon alone. A record naming another mount
// than its own is otherwise a spoof, which Dial refuses.
func (e Entry) SecondMountPoint() bool {
	return e.Err == nil && e.Record.MountPoint != "" && e.Record.MountPoint != e.MountPoint && sameMount(e.MountPoint, e.Record.MountPoint)
}

// ownMountOf is the user's live mount of backing, if any. A dead one (its
// daemon gone) does not count: nothing versions the tree through it, and
// mounting there again replaces it.
func ownMountOf(backing string) (Entry, bool) {
	uid := os.Geteuid()
	var mine []systemMount
	for _, m := range systemMounts() {
		if m.UID == uid && m.Backing == backing {
			mine = append(mine, m)
		}
	}
	for _, e := range listMounts(mine, uid, "") {
		if !errors.Is(e.Err, syscall.ENOTCONN) {
			return e, true
		}
	}
	return Entry{}, false
}

// lockHolder is a process holding a flock on a file.
type lockHolder struct {
	pid, uid int
	comm     string // its command's name
	exe      string // its executable, if known
}

// isDshfs reports whether h is another dshfs process: the same executable
// as this one, or one called dshfs (another build of it).
func (h lockHolder) isDshfs() bool {
	if h.pid == os.Getpid() {
		return false
	}
	if self, err := os.Executable(); err == nil && h.exe != "" && h.exe == self {
		return true
	}
	return h.comm == "dshfs"
}

// lockBacking takes the backing directory's lock for the daemon's life;
// the returned function lets it go. Where the user's dshfs has it already,
// the daemon is refused (CheckBacking); where another user's process holds
// it, or the filesystem has no flock, the daemon runs without it.
func lockBacking(backing string, log *slog.Logger) (func(), error) {
	fd, err := unix.Open(backing, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the backing directory: %w", err)
	}
	err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		if err := CheckBacking(backing, ""); err != nil {
			unix.Close(fd)
			return nil, err
		}
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) // its holder may have let go
	}
	if err == nil {
		return func() { unix.Close(fd) }, nil
	}
	unix.Close(fd)
	if errors.Is(err, unix.EWOULDBLOCK) {
		log.Warn("another user's process holds the backing directory's lock (another user's dshfs?); running without it", "backing", backing)
	} else {
		log.Warn("running without the backing directory's lock", "backing", backing, "err", err)
	}
	return func() {}, nil
}
