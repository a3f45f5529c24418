package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/internal/quote"
)

// stopTimeout is how long Stop waits for a daemon to unmount and exit. Its
// last commits are durable: under heavy I/O from other processes each sync
// can take seconds, and a stop makes several (the mount's last batch, the
// tool writes' settling, the clean mark).
const stopTimeout = 60 * time.Second

// Stop asks e's daemon to unmount (SIGTERM) and waits for it to exit;
// detached reports that the daemon was gone and the mount was detached
// instead. Only a daemon Dial has checked is signalled; one that cannot be
// reached or checked is an ErrUnreachable.
func Stop(ctx context.Context, e Entry) (detached bool, err error) {
	if errors.Is(e.Err, syscall.ENOTCONN) {
		if err := detachMount(e.MountPoint); err != nil {
			return false, fmt.Errorf("%s has lost its daemon and could not be detached: %v", e.MountPoint, err)
		}
		return true, nil
	}
	d, err := Dial(ctx, e)
	if err != nil {
		return false, err
	}
	d.Client.CloseIdle()
	return false, terminate(d.Record.Pid, d.Record.StateDir, e.UID)
}

// terminate sends SIGTERM to the daemon pid, checked by Dial, and waits for
// it to exit (awaitExit).
func terminate(pid int, stateDir string, uid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal the daemon (pid %d): %v", pid, err)
	}
	return awaitExit(pid, stateDir, uid)
}

// awaitExit waits for the daemon pid to exit, and says why its unmount
// failed if it left a note in its state directory.
func awaitExit(pid int, stateDir string, uid int) error {
	if waitExit(pid, time.Now().Add(stopTimeout)) {
		if note := readUnmountError(stateDir, uid); note != "" {
			if strings.HasSuffix(note, ErrDetachedInUse.Error()) {
				return ErrDetachedInUse
			}
			return fmt.Errorf("the daemon (pid %d) exited, but: %s", pid, note)
		}
		return nil
	}
	return fmt.Errorf("the daemon (pid %d) did not exit within %d s: its log, %s, says how far it got", pid, int(stopTimeout.Seconds()), quote.Name(filepath.Join(stateDir, LogFileName)))
}

// maxUnmountError bounds the note read back from a daemon's state directory.
const maxUnmountError = 4096

// readUnmountError is the note the daemon of uid left in stateDir when its
// unmount failed, "" if none. The record that names stateDir is the
// daemon's word, and root may be stopping another user's daemon: the note
// is read only as a small regular file of that user's, never through a
// link (it could name any file root may read) nor from a FIFO (which would
// hang the command).
func readUnmountError(stateDir string, uid int) string {
	f, err := os.OpenFile(filepath.Join(stateDir, unmountErrorFile), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxUnmountError))
	return strings.TrimSpace(string(b))
}

// pollExit asks kill(pid, 0) every 50 ms until pid has exited (true) or
// the deadline passes (false).
func pollExit(pid int, deadline time.Time) bool {
	for ; time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !processAlive(pid) {
			return true
		}
	}
	return !processAlive(pid)
}

// processAlive reports whether pid is a running process; an exited one
// its parent has not reaped yet is not.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return (err == nil || err == syscall.EPERM) && !zombie(pid)
}

// DetachMount detaches the mount at mnt lazily: its users keep what they
// hold open until they let go.
func DetachMount(mnt string) error { return detachMount(mnt) }
