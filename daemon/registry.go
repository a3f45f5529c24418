package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/fusefs"
	"golang.org/x/sys/unix"
)

// The mount registry: how the CLI finds the daemon of a running mount from
// any path in the mount or its backing directory, whoever asks and whatever
// their $HOME, state directory or working directory.
//
// The kernel's mount table (systemMounts) says which dshfs mounts exist: the
// mount point, the backing directory (the mount's source) and the uid that
// mounted it. The root of each mount answers the extended attribute
// user.dshfs.daemon with its daemon's record (socket, pid, state directory),
// from the daemon's memory. Nothing is kept on disk, so nothing goes stale:
// a mount whose daemon died answers ENOTCONN, and one the caller may not use
// answers EACCES, as every other access to it would. Stop, from an entry,
// has the daemon unmount and exit, or detaches a mount whose daemon died.
//
// Any user can mount a FUSE filesystem of type fuse.dshfs, with any source,
// whose root answers any record. So a command considers only the mounts
// the kernel says the caller made (root: its own, another user's only when
// its mount point is named), takes the mount point and backing directory
// from the mount table alone, and talks to the daemon a record names only
// once Dial has checked it: the socket file and the process serving it are
// the mount's user's, that process is the record's pid, and it says it
// serves that mount point. Only such a process is ever signalled.

// Record is what a running mount says about its daemon.
type Record struct {
	MountPoint string `json:"mount_point"`
	Backing    string `json:"backing"`
	Socket     string `json:"socket"`
	StateDir   string `json:"state_dir"`
	Pid        int    `json:"pid"`
	UID        int    `json:"uid"`
	Version    string `json:"version"`
	// Branch names the branch a branch's mount serves (its daemon is the
	// workspace's: stopping it stops the workspace's mount too).
	Branch string `json:"branch,omitempty"`
}

// record is the Record the root of cfg's mount answers.
func record(cfg Config) []byte {
	b, _ := json.Marshal(Record{MountPoint: cfg.MountPoint, Backing: cfg.Backing, Socket: socketPath(cfg.StateDir), StateDir: cfg.StateDir,
		Pid: os.Getpid(), UID: os.Geteuid(), Version: cfg.Version, Branch: cfg.Branch})
	return b
}

// systemMount is a dshfs mount in the kernel's mount table. Unsure marks a
// FUSE mount that may be another filesystem (macOS's table does not name
// the FUSE filesystem): it is dshfs only if its root answers the record.
type systemMount struct {
	MountPoint, Backing string
	UID                 int
	Unsure              bool
}

// Entry is a dshfs mount and, when this process may use it, the record its
// root answers; Err says why there is none.
type Entry struct {
	MountPoint, Backing string
	UID                 int // the uid that mounted it (-1: unknown)
	Record              Record
	Err                 error
}

// ErrNoMount is wrapped by the registry's errors when no dshfs mount holds
// the path, or none runs; ErrUnreachable when the mount was found but its
// daemon cannot be reached. Their messages are the whole sentence.
var (
	ErrNoMount     = errors.New("no such dshfs mount")
	ErrUnreachable = errors.New("the dshfs mount's daemon cannot be reached")
)

// lookupError is a sentence for the user that is one of the errors above.
type lookupError struct {
	msg  string
	kind error
	note string // what status says, if not the generic
}

func (e *lookupError) Error() string { return e.msg }
func (e *lookupError) Unwrap() error { return e.kind }

func noMount(format string, a ...any) error {
	return &lookupError{msg: fmt.Sprintf(format, a...), kind: ErrNoMount}
}

// recordTimeout bounds the wait for the mounts' records, all read at once:
// a daemon that is alive but stuck would hold the call forever, and a
// healthy one answers from memory.
const recordTimeout = time.Second

var (
	errNotAnswering = errors.New("its daemon does not answer")
	// errOtherUser: the mount is another user's, and was not named; its
	// record is not read.
	errOtherUser = errors.New("another user's mount")
)

// socketPath is where the daemon of a state directory serves the tools.
func socketPath(stateDir string) string { return filepath.Join(stateDir, "dshfs.sock") }

// ListMounts lists every dshfs mount on the machine, with the records of
// the caller's own.
func ListMounts() []Entry { return listMounts(systemMounts(), os.Geteuid(), "") }

// MountAt is the dshfs mount at the mount point mnt (the last mounted
// there, which hides the others), with its record if it is the caller's,
// or if the caller is root, which names it. Only the records of mounts at
// mnt are read: another mount of the user's whose daemon hangs would cost
// its recordTimeout (1 s) to every dshfs unmount.
func MountAt(mnt string) (Entry, bool) {
	var at []systemMount
	for _, m := range systemMounts() {
		if m.MountPoint == mnt {
			at = append(at, m)
		}
	}
	return mountAt(listMounts(at, os.Geteuid(), mnt), mnt)
}

// listMounts is the registry's view of ms for the user uid: the records of
// uid's own mounts, and of the one at named if uid is root, all read at
// once, so that mounts whose daemons are stuck cost one recordTimeout
// between them.
func listMounts(ms []systemMount, uid int, named string) []Entry {
	all := make([]Entry, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		all[i] = Entry{MountPoint: m.MountPoint, Backing: m.Backing, UID: m.UID, Err: errOtherUser}
		if (m.UID == uid && uid >= 0) || (uid == 0 && m.MountPoint == named) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				all[i].Record, all[i].Err = readRecord(m.MountPoint)
			}()
		}
	}
	wg.Wait()
	out := all[:0]
	for i, e := range all {
		if !ms[i].Unsure || e.Err == nil {
			out = append(out, e)
		}
	}
	return out
}

// mountAt is the entry of all at the mount point mnt, the last if several.
func mountAt(all []Entry, mnt string) (Entry, bool) {
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].MountPoint == mnt {
			return all[i], true
		}
	}
	return Entry{}, false
}

// readRecord reads the daemon record the root of the mount at mnt answers.
func readRecord(mnt string) (Record, error) {
	type answer struct {
		b   []byte
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		b, err := getxattr(mnt, fusefs.DaemonInfoXattr)
		ch <- answer{b, err}
	}()
	var a answer
	select {
	case a = <-ch:
	case <-time.After(recordTimeout):
		return Record{}, errNotAnswering
	}
	var r Record
	if a.err != nil {
		return r, a.err
	}
	if err := json.Unmarshal(a.b, &r); err != nil || r.Socket == "" {
		return r, fmt.Errorf("its record %q is not a dshfs record", a.b)
	}
	return r, nil
}

func getxattr(path, name string) ([]byte, error) {
	for {
		n, err := unix.Getxattr(path, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, n)
		n, err = unix.Getxattr(path, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // it grew between the two calls
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// Holding returns the caller's mount whose mount point or backing
// directory holds path (the deepest, if mounts nest). Another user's mount
// is never chosen by its source, which its maker picks.
func Holding(all []Entry, path string) (Entry, bool) {
	var best Entry
	bestLen := -1
	for _, e := range all {
		if e.Err == errOtherUser {
			continue
		}
		for _, root := range []string{e.MountPoint, e.Backing} {
			if within(root, path) && len(root) > bestLen {
				best, bestLen = e, len(root)
			}
		}
	}
	return best, bestLen >= 0
}

// othersHolding is another user's mount whose mount point holds path (the
// deepest): the path is really in it, and the caller is told whose it is.
func othersHolding(all []Entry, path string) (Entry, bool) {
	var best Entry
	found := false
	for _, e := range all {
		if e.Err == errOtherUser && within(e.MountPoint, path) && (!found || len(e.MountPoint) > len(best.MountPoint)) {
			best, found = e, true
		}
	}
	return best, found
}

// within reports whether path is root or below it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// Query is how a command names the mount it means.
type Query struct {
	// Mount is a mount point (root may name another user's), or a path in
	// one of the caller's mounts (--mount).
	Mount string
	// Path is a path in the mount: its mount point or backing directory, or
	// below either.
	Path string
	// WD is the working directory: its mount, else the caller's only one.
	WD string
}

// Find finds the mount a command means: the one at or holding q.Mount;
// else the one holding q.Path; else, with neither, the one holding q.WD or
// the caller's only mount. Its errors are ErrNoMount; the entry's
// Reachable says whether its daemon may be asked.
func Find(q Query) (Entry, error) {
	return pick(listMounts(systemMounts(), os.Geteuid(), q.Mount), q)
}

// Locate finds the daemon a command means (Find) and checks it (Dial). Its
// errors are ErrNoMount or ErrUnreachable.
func Locate(ctx context.Context, q Query) (Daemon, error) {
	e, err := Find(q)
	if err != nil {
		return Daemon{}, err
	}
	return Dial(ctx, e)
}

// pick is Find's choice among all.
func pick(all []Entry, q Query) (Entry, error) {
	if q.Mount != "" {
		if e, ok := mountAt(all, q.Mount); ok {
			return e, nil
		}
		q.Path = q.Mount
	}
	if q.Path != "" {
		if e, ok := Holding(all, q.Path); ok {
			return e, nil
		}
		if e, ok := othersHolding(all, q.Path); ok {
			return e, nil
		}
		return Entry{}, noMount("no dshfs mount holds %s; dshfs status lists the running mounts", q.Path)
	}
	if e, ok := Holding(all, q.WD); ok {
		return e, nil
	}
	var own []Entry
	for _, e := range all {
		if e.Err != errOtherUser {
			own = append(own, e)
		}
	}
	switch len(own) {
	case 0:
		return Entry{}, noMount("no dshfs mount of yours is running; start one with: dshfs mount BACKING MOUNTPOINT")
	case 1:
		return own[0], nil
	}
	return Entry{}, noMount("%s is in none of your %d running dshfs mounts; name one with --mount (dshfs status lists them)", q.WD, len(own))
}

// Holds reports whether path is in the mount: its mount point or its
// backing directory (as the mount table has them), or below either.
func (e Entry) Holds(path string) bool {
	return within(e.MountPoint, path) || within(e.Backing, path)
}

// Reachable says, as an ErrUnreachable, why e's daemon cannot be reached.
func (e Entry) Reachable() error {
	if e.Err == nil {
		return nil
	}
	return &lookupError{msg: unreachableReason(e), kind: ErrUnreachable}
}

func unreachableReason(e Entry) string {
	switch {
	case errors.Is(e.Err, syscall.ENOTCONN):
		return fmt.Sprintf("the dshfs mount at %s has lost its daemon; dshfs mount %s %s starts it again", e.MountPoint, e.Backing, e.MountPoint)
	case errors.Is(e.Err, errOtherUser) && os.Geteuid() == 0:
		return fmt.Sprintf("the dshfs mount at %s belongs to uid %d; to use it as root, name its mount point: --mount %s", e.MountPoint, e.UID, e.MountPoint)
	case errors.Is(e.Err, errOtherUser):
		return fmt.Sprintf("the dshfs mount at %s belongs to uid %d; run the command as uid %d", e.MountPoint, e.UID, e.UID)
	case errors.Is(e.Err, syscall.EACCES), errors.Is(e.Err, syscall.EPERM):
		return fmt.Sprintf("the dshfs mount at %s belongs to uid %d and is not open to this user; run the command as uid %d", e.MountPoint, e.UID, e.UID)
	case errors.Is(e.Err, unix.ENODATA), errors.Is(e.Err, unix.ENOTSUP):
		return fmt.Sprintf("the dshfs mount at %s does not say where its daemon is (an older dshfs runs it); unmount it and mount it again", e.MountPoint)
	}
	return fmt.Sprintf("cannot reach the daemon of the dshfs mount at %s: %v", e.MountPoint, e.Err)
}

// Note is what status says of a mount whose record cannot be read ("":
// none).
func (e Entry) Note() string {
	switch {
	case e.Err == nil:
		return ""
	case errors.Is(e.Err, syscall.ENOTCONN):
		return "daemon gone"
	case errors.Is(e.Err, syscall.EACCES), errors.Is(e.Err, syscall.EPERM):
		return "not open to this user"
	case errors.Is(e.Err, errNotAnswering):
		return "daemon not answering"
	case errors.Is(e.Err, errOtherUser):
		return "another user's mount"
	}
	return strings.TrimPrefix(e.Err.Error(), "its ")
}

// sameMount reports whether the mount points a and b show one mount (one
// FUSE connection: b a bind mount of a, or the other way), by the mount
// table alone.
func sameMount(a, b string) bool { return slices.Contains(fusefs.OtherMountPoints(a), b) }
