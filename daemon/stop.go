package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

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
