package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// Record is what a running mount says about its daemon.
type Record struct {
	MountPoint string `json:"mount_point"`
	Backing    string `json:"backing"`
	Socket     string `json:"socket"`
	StateDir   string `json:"state_dir"`
	Pid        int    `json:"pid"`
	UID        int    `json:"uid"`
	Version    string `json:"version"`
}

// record is the Record the root of cfg's mount answers.
func record(cfg Config) []byte {
	b, _ := json.Marshal(Record{MountPoint: cfg.MountPoint, Backing: cfg.Backing, Socket: socketPath(cfg.StateDir), StateDir: cfg.StateDir,
		Pid: os.Getpid(), UID: os.Geteuid(), Version: cfg.Version})
	return b
}

// Holds reports whether path is in the mount: its mount point or its
// backing directory, or below either.
func (r Record) Holds(path string) bool {
	return within(r.MountPoint, path) || within(r.Backing, path)
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
}

func (e *lookupError) Error() string { return e.msg }
func (e *lookupError) Unwrap() error { return e.kind }

func noMount(format string, a ...any) error {
	return &lookupError{msg: fmt.Sprintf(format, a...), kind: ErrNoMount}
}

// recordTimeout bounds the wait for a mount's record: a daemon that is alive
// but stuck would hold the call forever.
const recordTimeout = 2 * time.Second

var errNotAnswering = errors.New("its daemon does not answer")

// socketPath is where the daemon of a state directory serves the tools.
func socketPath(stateDir string) string { return filepath.Join(stateDir, "dshfs.sock") }

// ListMounts lists every dshfs mount on the machine, each with its record.
func ListMounts() []Entry {
	var out []Entry
	for _, m := range systemMounts() {
		e := Entry{MountPoint: m.MountPoint, Backing: m.Backing, UID: m.UID}
		e.Record, e.Err = readRecord(m.MountPoint)
		if m.Unsure && e.Err != nil {
			continue
		}
		if e.Err == nil && e.Record.Backing != "" {
			e.Backing = e.Record.Backing
		}
		out = append(out, e)
	}
	return out
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

// Holding returns the mount whose mount point or backing directory holds
// path (the deepest, if mounts nest).
func Holding(all []Entry, path string) (Entry, bool) {
	var best Entry
	bestLen := -1
	for _, e := range all {
		for _, root := range []string{e.MountPoint, e.Backing} {
			if within(root, path) && len(root) > bestLen {
				best, bestLen = e, len(root)
			}
		}
	}
	return best, bestLen >= 0
}

// within reports whether path is root or below it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// Locate finds the daemon a command means: of the mount holding path; with
// no path, of the mount holding the working directory wd, or else of the
// only dshfs mount on the machine. Its errors are ErrNoMount or
// ErrUnreachable.
func Locate(path, wd string) (Record, error) {
	e, err := pick(ListMounts(), path, wd)
	if err != nil {
		return Record{}, err
	}
	return e.Record, e.Reachable()
}

// pick is Locate's choice among all.
func pick(all []Entry, path, wd string) (Entry, error) {
	if path != "" {
		if e, ok := Holding(all, path); ok {
			return e, nil
		}
		return Entry{}, noMount("no dshfs mount holds %s; dshfs status lists the running mounts", path)
	}
	if e, ok := Holding(all, wd); ok {
		return e, nil
	}
	switch len(all) {
	case 0:
		return Entry{}, noMount("no dshfs mount is running; start one with: dshfs mount BACKING MOUNTPOINT")
	case 1:
		return all[0], nil
	}
	return Entry{}, noMount("%s is in none of the %d running dshfs mounts; name one with --mount (dshfs status lists them)", wd, len(all))
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
	}
	return strings.TrimPrefix(e.Err.Error(), "its ")
}

// stopTimeout is how long Stop waits for a daemon to unmount and exit.
const stopTimeout = 30 * time.Second

// Stop asks e's daemon to unmount (SIGTERM) and waits for it to exit;
// detached reports that the daemon was gone and the mount was detached
// instead. A daemon that cannot be reached is an ErrUnreachable.
func Stop(e Entry) (detached bool, err error) {
	if errors.Is(e.Err, syscall.ENOTCONN) {
		if err := detachMount(e.MountPoint); err != nil {
			return false, fmt.Errorf("%s has lost its daemon and could not be detached: %v", e.MountPoint, err)
		}
		return true, nil
	}
	if err := e.Reachable(); err != nil {
		return false, err
	}
	pid := e.Record.Pid
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Signal(syscall.SIGTERM)
	}
	if err != nil {
		return false, fmt.Errorf("signal the daemon (pid %d): %v", pid, err)
	}
	return false, awaitExit(pid, e.Record.StateDir)
}

// awaitExit waits for the daemon pid to exit, and says why its unmount
// failed if it left a note in its state directory.
func awaitExit(pid int, stateDir string) error {
	for deadline := time.Now().Add(stopTimeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if processAlive(pid) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(stateDir, unmountErrorFile)); err == nil {
			return fmt.Errorf("the daemon (pid %d) exited, but: %s", pid, strings.TrimSpace(string(b)))
		}
		return nil
	}
	return fmt.Errorf("the daemon (pid %d) did not exit within 30 s", pid)
}

// processAlive reports whether pid is a running process.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}
