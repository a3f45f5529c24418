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
	stateDir := o.StateDir
	if stateDir == "" {
		var err error
		if stateDir, err = defaultStateDir(o.Backing); err != nil {
			return cli.Exit(err.Error(), exitFailure)
		}
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return cli.Exit(fmt.Sprintf("make the state directory: %v", err), exitFailure)
	}
	logPath := filepath.Join(stateDir, logFileName)
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
	cmd := exec.Command(self, daemonArgs(o, stateDir)...)
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
	fmt.Printf("%s: mounted %s at %s (pid %d, log %s)\n", name, o.Backing, o.Mountpoint, pid, logPath)
	return nil
}

// logFileName, in the state directory, is a detached daemon's log.
const logFileName = "dshfs.log"

// daemonArgs are the arguments of the detached `dshfs mount --foreground`.
func daemonArgs(o mountOptions, stateDir string) []string {
	args := []string{"mount", "--foreground", "--ready-fd", "3", "--state", stateDir,
		"--keep-max-bytes", strconv.FormatInt(o.KeepMax, 10),
		"--retain-bytes", strconv.FormatInt(o.RetainBytes, 10),
		"--retain-age", o.RetainAge.String(),
		"--max-image-bytes", strconv.FormatInt(o.MaxImageSize, 10),
		"--forget-actors-after", o.ForgetActors.String()}
	for _, f := range []struct {
		name string
		on   bool
	}{{"--no-policy", o.NoPolicy}, {"--allow-other", o.AllowOther}, {"--nonempty", o.NonEmpty}, {"--debug", o.Debug}, {"--baseline", o.Baseline}, {"--no-passthrough", o.NoPassthrough}} {
		if f.on {
			args = append(args, f.name)
		}
	}
	if o.CacheTimeout > 0 {
		args = append(args, "--cache-timeout", o.CacheTimeout.String())
	}
	return append(args, "--", o.Backing, o.Mountpoint)
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
