package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/daemon"
	"github.com/dshfs/dshfs/internal/quote"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/urfave/cli/v2"
)

// What the commands that talk to a mount's daemon share: finding it (the
// mount holding the path, the current directory, --mount, or the only
// one), turning its answers into exit statuses, and reading paths and
// versions from the command line.

var mountFlag = &cli.StringFlag{Name: "mount", Usage: "the mount point", DefaultText: "the mount holding the path or the current directory, else the only one"}

// clientFor finds the daemon of --mount, or of the mount holding path, or
// (with neither) of the mount holding the working directory or the
// caller's only one; its client talks only to that daemon.
func clientFor(c *cli.Context, path string) (*unixsocket.Client, error) {
	return clientForPaths(c, []string{path})
}

// clientForPaths is clientFor for the first of paths; every one of them
// must be in that mount (a usage error otherwise, said in the CLI's words
// rather than answered with a tool's read error).
func clientForPaths(c *cli.Context, paths []string) (*unixsocket.Client, error) {
	d, err := locate(c.Context, daemon.Query{Mount: mountArg(c.String("mount")), Path: first(paths)})
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if p != "" && !d.Holds(p) {
			return nil, cli.Exit(fmt.Sprintf("%s is not in the mount at %s; give a path inside it", quote.Name(p), quote.Name(d.MountPoint)), exitUsage)
		}
	}
	return d.Client, nil
}

// cliPaths makes the command line's paths absolute (absPath), in place: a
// relative one is taken from --mount when it is given, as git -C takes it,
// else from the working directory.
func cliPaths(c *cli.Context, paths []string) []string {
	m := c.String("mount")
	for i, p := range paths {
		if m != "" && !filepath.IsAbs(p) {
			p = filepath.Join(mountArg(m), p)
		}
		paths[i] = absPath(p)
	}
	return paths
}

// mountArg is the real path of --mount's argument ("" if none).
func mountArg(m string) string {
	if m == "" {
		return ""
	}
	return absDir(m)
}

// fileClient checks the versions given for the file at path, then finds
// the daemon of the mount holding it (clientFor); it returns path made
// absolute.
func fileClient(c *cli.Context, path string, versions ...string) (*unixsocket.Client, string, error) {
	if err := checkVersions(versions...); err != nil {
		return nil, "", err
	}
	path = cliPaths(c, []string{path})[0]
	client, err := clientFor(c, path)
	return client, path, err
}

// locate finds and checks the daemon a command means (daemon.Locate), from
// the working directory.
func locate(ctx context.Context, q daemon.Query) (daemon.Daemon, error) {
	q.WD = workingDir()
	d, err := daemon.Locate(ctx, q)
	return d, lookupExit(err)
}

// lookupExit gives a registry error its exit status: not found (4), not
// reachable (5), else a failure.
func lookupExit(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, daemon.ErrNoMount):
		return cli.Exit(err.Error(), exitNotFound)
	case errors.Is(err, daemon.ErrUnreachable):
		return cli.Exit(err.Error(), exitUnreachable)
	}
	return cli.Exit(err.Error(), exitFailure)
}

// daemonError turns an error of a call to the daemon into the CLI's exit
// status: what does not exist is "not found", a refusal because the file is
// being written a conflict, a daemon that does not answer "not reachable".
func daemonError(err error) error {
	var apiErr *unixsocket.APIError
	var opErr *net.OpError
	switch {
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound:
		return cli.Exit(apiErr.Message, exitNotFound)
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict:
		return cli.Exit(apiErr.Message, exitToolError)
	case errors.As(err, &apiErr):
		return cli.Exit(apiErr.Message, exitFailure)
	case errors.Is(err, unixsocket.ErrWrongPeer):
		return cli.Exit(err.Error()+"; dshfs status lists the mounts and their users", exitUnreachable)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return cli.Exit(err.Error()+"; dshfs status shows whether the mount's daemon runs", exitUnreachable)
	}
	return cli.Exit(err.Error(), exitFailure)
}

// checkVersions refuses, as usage errors, arguments that cannot name a
// version: b3:<hex>, or at least 4 hex digits of one ("" is no argument).
func checkVersions(args ...string) error {
	for _, a := range args {
		h := strings.ToLower(strings.TrimPrefix(a, "b3:"))
		if a == "" {
			continue
		}
		if len(h) < 4 || len(h) > 64 || strings.Trim(h, "0123456789abcdef") != "" {
			return cli.Exit(fmt.Sprintf("%q is not a version: give b3:<hex>, or at least 4 hex digits of one (dshfs log lists them)", a), exitUsage)
		}
	}
	return nil
}

// absPath is p made absolute, with the symlinks of its directory resolved:
// a mount is registered under its real path, however the caller spells it
// (a symlinked parent, $PWD). The last element is left for the daemon to
// resolve as a tool would.
func absPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	dir, base := filepath.Split(abs)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(real, base)
	}
	return abs
}

// workingDir is the real path of the working directory ("/" if it is gone).
func workingDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "/"
	}
	return absDir(wd)
}

// first is the first of s, or "".
func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// absDir is the real path of the directory dir.
func absDir(dir string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		if abs, err := filepath.Abs(real); err == nil {
			return abs
		}
	}
	return absPath(dir)
}

// actorOrUser is the --actor given, or else the name of the user running
// the command: a restore or rewind names who made it in the history.
func actorOrUser(actor string) string {
	if actor != "" {
		return actor
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "uid " + strconv.Itoa(os.Getuid())
}
