package main

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
	"github.com/urfave/cli/v2"
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
// answers EACCES, as every other access to it would.

// mountRecord is what a running mount says about its daemon.
type mountRecord struct {
	MountPoint string `json:"mount_point"`
	Backing    string `json:"backing"`
	Socket     string `json:"socket"`
	StateDir   string `json:"state_dir"`
	Pid        int    `json:"pid"`
	UID        int    `json:"uid"`
	Version    string `json:"version"`
}

// systemMount is a dshfs mount in the kernel's mount table. Unsure marks a
// FUSE mount that may be another filesystem (macOS's table does not name
// the FUSE filesystem): it is dshfs only if its root answers the record.
type systemMount struct {
	MountPoint, Backing string
	UID                 int
	Unsure              bool
}

// mountEntry is a dshfs mount and, when this process may use it, the
// record its root answers; Err says why there is none.
type mountEntry struct {
	systemMount
	Record mountRecord
	Err    error
}

// recordTimeout bounds the wait for a mount's record: a daemon that is alive
// but stuck would hold the call forever.
const recordTimeout = 2 * time.Second

var errNotAnswering = errors.New("its daemon does not answer")

// socketPath is where the daemon of a state directory serves the tools.
func socketPath(stateDir string) string { return filepath.Join(stateDir, "dshfs.sock") }

// listMounts lists every dshfs mount on the machine, each with its record.
func listMounts() []mountEntry {
	var out []mountEntry
	for _, m := range systemMounts() {
		e := mountEntry{systemMount: m}
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
func readRecord(mnt string) (mountRecord, error) {
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
		return mountRecord{}, errNotAnswering
	}
	var r mountRecord
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

// holding returns the mount whose mount point or backing directory holds
// path (the deepest, if mounts nest).
func holding(all []mountEntry, path string) (mountEntry, bool) {
	var best mountEntry
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

// locate finds the daemon a command means: of the mount holding path; with
// no path, of the mount holding the working directory, or else of the only
// dshfs mount on the machine. Its errors carry the exit status: not found
// (4) or not reachable (5).
func locate(path string) (mountRecord, error) {
	e, err := pick(listMounts(), path, workingDir())
	if err != nil {
		return mountRecord{}, err
	}
	return e.Record, reachable(e)
}

// pick is locate's choice among all, given the working directory wd.
func pick(all []mountEntry, path, wd string) (mountEntry, error) {
	if path != "" {
		if e, ok := holding(all, path); ok {
			return e, nil
		}
		return mountEntry{}, cli.Exit(fmt.Sprintf("no dshfs mount holds %s; dshfs status lists the running mounts", path), exitNotFound)
	}
	if e, ok := holding(all, wd); ok {
		return e, nil
	}
	switch len(all) {
	case 0:
		return mountEntry{}, cli.Exit("no dshfs mount is running; start one with: dshfs mount BACKING MOUNTPOINT", exitNotFound)
	case 1:
		return all[0], nil
	}
	return mountEntry{}, cli.Exit(fmt.Sprintf("%s is in none of the %d running dshfs mounts; name one with --mount (dshfs status lists them)", wd, len(all)), exitNotFound)
}

// reachable says, as the CLI's error, why e's daemon cannot be reached.
func reachable(e mountEntry) error {
	if e.Err == nil {
		return nil
	}
	return cli.Exit(unreachableReason(e), exitUnreachable)
}

func unreachableReason(e mountEntry) string {
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

// workingDir is the real path of the working directory ("/" if it is gone).
func workingDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "/"
	}
	return absDir(wd)
}

// mountNote is the status note for a mount whose record cannot be read.
func mountNote(e mountEntry) string {
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
