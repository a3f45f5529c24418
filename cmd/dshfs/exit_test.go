package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/daemon"
	"github.com/urfave/cli/v2"
)

func exitCode(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return -1
}

func TestCheckVersions(t *testing.T) {
	for arg, ok := range map[string]bool{"": true, "1f2e": true, "b3:1F2E3D4C": true, "b3:" + strings.Repeat("a", 64): true,
		"1f2": false, "not-a-version": false, "b3:xyz1": false, strings.Repeat("a", 65): false} {
		err := checkVersions(arg)
		if (err == nil) != ok || (err != nil && exitCode(err) != exitUsage) {
			t.Errorf("checkVersions(%q) = %v", arg, err)
		}
	}
}

// Exit status 2 is for usage only: an action's uncoded error is a failure.
func TestExitStatus(t *testing.T) {
	wrapped := failureUnlessCoded(func(*cli.Context) error { return errors.New("disk on fire") })
	if err := wrapped(nil); exitCode(err) != exitFailure {
		t.Fatalf("uncoded error: exit %d", exitCode(err))
	}
	coded := failureUnlessCoded(func(*cli.Context) error { return cli.Exit("x", exitNotFound) })
	if err := coded(nil); exitCode(err) != exitNotFound {
		t.Fatalf("coded error: exit %d", exitCode(err))
	}
	for args, want := range map[string]int{"dshfs nope": exitUsage, "dshfs call --bogus x y": exitUsage, "dshfs call read": exitUsage, "dshfs tools": exitOK} {
		if got := run(strings.Fields(args)); got != want {
			t.Errorf("%s: exit %d, want %d", args, got, want)
		}
	}
}

// The registry's errors keep their exit statuses: no mount 4, a daemon
// that cannot be reached 5, anything else a failure; the message is the
// registry's sentence.
func TestLookupExit(t *testing.T) {
	gone := daemon.Entry{MountPoint: "/mnt/a", Backing: "/src/a", Err: syscall.ENOTCONN}
	noMount := fmt.Errorf("no dshfs mount holds /x: %w", daemon.ErrNoMount)
	for err, want := range map[error]int{noMount: exitNotFound, gone.Reachable(): exitUnreachable, errors.New("disk on fire"): exitFailure} {
		got := lookupExit(err)
		if exitCode(got) != want || got.Error() != err.Error() {
			t.Errorf("%v: exit %d (%q), want %d", err, exitCode(got), got, want)
		}
	}
	if lookupExit(nil) != nil {
		t.Error("no error is an error")
	}
}
