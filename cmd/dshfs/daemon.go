package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
)

// daemonize starts `dshfs mount --foreground` detached (its own session,
// output to a log file in the state directory) and waits until it reports
// that the mount and the socket are ready, or why it failed.
func daemonize(o mountOptions, name string) error {
	backing, _ := filepath.Abs(o.Backing)
	stateDir := o.StateDir
	if stateDir == "" {
		var err error
		if stateDir, err = defaultStateDir(backing); err != nil {
			return cli.Exit(err.Error(), exitFailure)
		}
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	logPath := filepath.Join(stateDir, "dshfs.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	defer logFile.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	self, err := os.Executable()
	if err != nil {
		return cli.Exit(err.Error(), exitFailure)
	}
	args := []string{"mount", "--foreground", "--ready-fd", "3", "--state", stateDir}
	if o.NoPolicy {
		args = append(args, "--no-policy")
	}
	if o.AllowOther {
		args = append(args, "--allow-other")
	}
	if o.KeepMax != 0 {
		args = append(args, "--keep-max-bytes", strconv.FormatInt(o.KeepMax, 10))
	}
	if o.RetainBytes > 0 {
		args = append(args, "--retain-bytes", strconv.FormatInt(o.RetainBytes, 10))
	}
	if o.RetainAge > 0 {
		args = append(args, "--retain-age", o.RetainAge.String())
	}
	if o.MaxImageSize > 0 {
		args = append(args, "--max-image-bytes", strconv.FormatInt(o.MaxImageSize, 10))
	}
	if o.ForgetActors > 0 {
		args = append(args, "--forget-actors-after", o.ForgetActors.String())
	}
	if o.CacheTimeout > 0 {
		args = append(args, "--cache-timeout", o.CacheTimeout.String())
	}
	args = append(args, "--", backing, o.Mountpoint)
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = logFile, logFile, []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return cli.Exit(fmt.Sprintf("start the daemon: %v", err), exitFailure)
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	line = strings.TrimSpace(line)
	if line != "ok" {
		cmd.Wait()
		if line == "" {
			line = "the daemon exited before it was ready; see " + logPath
		}
		return cli.Exit(strings.TrimPrefix(line, "error: "), exitFailure)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	fmt.Printf("%s: mounted %s at %s (pid %d, log %s)\n", name, backing, o.Mountpoint, pid, logPath)
	return nil
}

// readyPipe tells the waiting parent that the daemon is serving, or why it
// is not — once: the descriptor is closed after, and its number soon names
// another file (one the mount opens), which a second report would write
// into.
type readyPipe struct{ f *os.File }

// openReadyPipe takes fd, the pipe the parent reads; 0 means none.
func openReadyPipe(fd int) *readyPipe {
	if fd <= 0 {
		return &readyPipe{}
	}
	return &readyPipe{f: os.NewFile(uintptr(fd), "ready")}
}

// report sends err (nil: ready) and reports whether anyone was waiting.
func (p *readyPipe) report(err error) bool {
	if p.f == nil {
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
