package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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
// theirs holds its lock. A holder that serves no mount of it is given
// lockGrace to let go: a daemon unmounted from outside (fusermount3 -u)
// still closes its index before it exits, and a mount run right after the
// unmount should not be refused for that.
func CheckBacking(backing string) error {
	deadline := time.Now().Add(lockGrace)
	for {
		if e, ok := ownMountOf(backing); ok {
			if e.Err != nil {
				return fmt.Errorf("the backing directory %s is already mounted at %s (%s); unmount it first (dshfs unmount %s)", backing, e.MountPoint, e.Note(), e.MountPoint)
			}
			return fmt.Errorf("the backing directory %s is already mounted at %s by pid %d; use that mount, or unmount it first (dshfs unmount %s)", backing, e.MountPoint, e.Record.Pid, e.MountPoint)
		}
		h, held := ownLockHolder(backing)
		switch {
		case !held:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("the backing directory %s is held by pid %d (%s), which serves no mount of it; stop it first (kill %d)", backing, h.pid, h.comm, h.pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockGrace is how long CheckBacking waits for a holder of the backing
// directory's lock that serves no mount of it to let go.
const lockGrace = 2 * time.Second

// ownLockHolder is a process of the user's that holds the lock on dir.
func ownLockHolder(dir string) (lockHolder, bool) {
	for _, h := range lockHolders(dir) {
		if h.uid == os.Geteuid() {
			return h, true
		}
	}
	return lockHolder{}, false
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
		if err := CheckBacking(backing); err != nil {
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
