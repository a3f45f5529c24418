package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// A detached daemon is this program started again (Start's args say how
// it reaches FromParent) in a session of its own, its output in the log in
// the state directory, with two pipes from its parent: it reads its Config
// as JSON from configFd, and writes "ok", or "error: why", to readyFd once.
// The Config travels whole, so there is no list of flags to re-pass that a
// new option could be left out of.
const (
	readyFd  = 3 // ExtraFiles[0]
	configFd = 4 // ExtraFiles[1]
)

// LogFileName, in the state directory, is a detached daemon's log.
const LogFileName = "dshfs.log"

// Detached is a daemon Start started: its pid and its log.
type Detached struct {
	Pid int
	Log string
}

// Start starts a daemon for cfg detached, running this program with args
// (which must lead it to FromParent and Run), and returns once the daemon
// serves, or with why it does not.
func Start(cfg Config, args []string) (Detached, error) {
	if cfg.StateDir == "" {
		var err error
		if cfg.StateDir, err = DefaultStateDir(cfg.Backing); err != nil {
			return Detached{}, err
		}
	}
	logFile, err := openLog(cfg.StateDir)
	if err != nil {
		return Detached{}, err
	}
	defer logFile.Close()
	logPath := logFile.Name()
	cmd, ready, err := startChild(cfg, args, logFile)
	if err != nil {
		return Detached{}, err
	}
	if err := awaitReady(cmd, ready, logPath); err != nil {
		return Detached{}, err
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	return Detached{Pid: pid, Log: logPath}, nil
}

// openLog opens the daemon's log in stateDir (made if missing, refused if
// another user could change it: PrepareStateDir) for appending.
func openLog(stateDir string) (*os.File, error) {
	stateDir, err := PrepareStateDir(stateDir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(stateDir, LogFileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the daemon's log %s: %v (a symbolic link is refused)", path, err)
	}
	return f, nil
}

// startChild starts the daemon's process and hands it cfg; it returns the
// pipe the daemon reports its readiness on.
func startChild(cfg Config, args []string, logFile *os.File) (*exec.Cmd, *os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer readyW.Close()
	configR, configW, err := os.Pipe()
	if err != nil {
		readyR.Close()
		return nil, nil, err
	}
	defer configR.Close()
	defer configW.Close()
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{readyW, configR} // readyFd, configFd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		readyR.Close()
		return nil, nil, fmt.Errorf("start the daemon: %v", err)
	}
	// A write that fails means the daemon is gone already: its readiness
	// (none) says so.
	json.NewEncoder(configW).Encode(cfg)
	return cmd, readyR, nil
}

// awaitReady reads the daemon's one report: nil once it serves.
func awaitReady(cmd *exec.Cmd, ready *os.File, logPath string) error {
	line, _ := bufio.NewReader(ready).ReadString('\n')
	ready.Close()
	line = strings.TrimSpace(line)
	if line == "ok" {
		return nil
	}
	cmd.Wait()
	if line == "" {
		line = "the daemon exited before it was ready; see " + logPath
	}
	return errors.New(strings.TrimPrefix(line, "error: "))
}

// FromParent is the detached daemon's side of Start: the Config its parent
// sent, and where to report readiness (nil when there is no parent).
func FromParent() (Config, *Ready, error) {
	var cfg Config
	config, ready := inheritedPipe(configFd, "config"), inheritedPipe(readyFd, "ready")
	if config == nil || ready == nil {
		return cfg, nil, errors.New("no daemon configuration on descriptor 4: a detached daemon is started by dshfs mount")
	}
	defer config.Close()
	if err := json.NewDecoder(config).Decode(&cfg); err != nil {
		return cfg, &Ready{f: ready}, fmt.Errorf("read the daemon's configuration: %w", err)
	}
	return cfg, &Ready{f: ready}, nil
}

// inheritedPipe is descriptor fd if it is a pipe, else nil (and fd is
// left alone: it is not this package's).
func inheritedPipe(fd uintptr, name string) *os.File {
	f := os.NewFile(fd, name)
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return nil
	}
	return f
}

// Ready tells the waiting parent that the daemon is serving, or why it is
// not — once: the descriptor is closed after, and its number soon names
// another file (one the mount opens), which a second report would write
// into. A nil Ready has nobody waiting.
type Ready struct{ f *os.File }

// Report sends err (nil: ready) and reports whether anyone was waiting.
func (p *Ready) Report(err error) bool {
	if p == nil || p.f == nil {
		return false
	}
	if err != nil {
		fmt.Fprintf(p.f, "error: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		fmt.Fprintln(p.f, "ok")
	}
	p.f.Close()
	p.f = nil
	return true
}
