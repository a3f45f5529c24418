package main

import (
	"strings"
	"syscall"
	"testing"
)

// pick chooses the mount a command means: the one holding the path (its
// mount point or backing directory, the deepest), else the one holding the
// working directory, else the only one on the machine.
func TestPick(t *testing.T) {
	mnt := func(mp, backing string) mountEntry {
		return mountEntry{systemMount: systemMount{MountPoint: mp, Backing: backing}, Record: mountRecord{Socket: mp + ".sock"}}
	}
	a, b, nested := mnt("/mnt/a", "/src/a"), mnt("/mnt/b", "/src/b"), mnt("/mnt/a/deep", "/src/deep")
	for _, tc := range []struct {
		name      string
		all       []mountEntry
		path, wd  string
		want      string // the mount point chosen, or "" for an error
		wantCode  int
		wantInMsg string
	}{
		{"path in a mount point", []mountEntry{a, b}, "/mnt/b/x.txt", "/", "/mnt/b", 0, ""},
		{"path in a backing directory", []mountEntry{a, b}, "/src/a/d/x.txt", "/", "/mnt/a", 0, ""},
		{"the mount point itself", []mountEntry{a, b}, "/mnt/a", "/", "/mnt/a", 0, ""},
		{"the deepest of nested mounts", []mountEntry{a, nested}, "/mnt/a/deep/x", "/", "/mnt/a/deep", 0, ""},
		{"a path in no mount", []mountEntry{a}, "/elsewhere/x", "/mnt/a", "", exitNotFound, "no dshfs mount holds /elsewhere/x"},
		{"a prefix is not a parent", []mountEntry{a}, "/mnt/ab/x", "/", "", exitNotFound, "no dshfs mount holds"},
		{"no path: the working directory's", []mountEntry{a, b}, "", "/src/b/sub", "/mnt/b", 0, ""},
		{"no path, outside: the only mount", []mountEntry{b}, "", "/", "/mnt/b", 0, ""},
		{"no path, outside, two mounts", []mountEntry{a, b}, "", "/", "", exitNotFound, "/ is in none of the 2 running dshfs mounts; name one with --mount"},
		{"no path, no mount", nil, "", "/", "", exitNotFound, "no dshfs mount is running"},
	} {
		e, err := pick(tc.all, tc.path, tc.wd)
		switch {
		case tc.want != "" && (err != nil || e.MountPoint != tc.want):
			t.Errorf("%s: picked %q, %v; want %q", tc.name, e.MountPoint, err, tc.want)
		case tc.want == "" && (exitCode(err) != tc.wantCode || !strings.Contains(err.Error(), tc.wantInMsg)):
			t.Errorf("%s: %v (exit %d), want exit %d with %q", tc.name, err, exitCode(err), tc.wantCode, tc.wantInMsg)
		}
	}
}

// A mount whose record cannot be read is found, but its daemon is not
// reachable (exit 5), with the reason and what to do.
func TestReachable(t *testing.T) {
	e := mountEntry{systemMount: systemMount{MountPoint: "/mnt/a", Backing: "/src/a", UID: 1000}}
	for _, tc := range []struct {
		err  error
		want string
		note string
	}{
		{syscall.ENOTCONN, "the dshfs mount at /mnt/a has lost its daemon; dshfs mount /src/a /mnt/a starts it again", "daemon gone"},
		{syscall.EACCES, "belongs to uid 1000 and is not open to this user; run the command as uid 1000", "not open to this user"},
		{errNotAnswering, "cannot reach the daemon of the dshfs mount at /mnt/a: its daemon does not answer", "daemon not answering"},
		{syscall.ENODATA, "an older dshfs runs it", "no data available"},
	} {
		e.Err = tc.err
		if err := reachable(e); exitCode(err) != exitUnreachable || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v (exit %d), want exit %d with %q", tc.err, err, exitCode(err), exitUnreachable, tc.want)
		}
		if got := mountNote(e); got != tc.note {
			t.Errorf("%v: note %q, want %q", tc.err, got, tc.note)
		}
	}
	if e.Err = nil; reachable(e) != nil || mountNote(e) != "" {
		t.Error("a readable record is reachable, with no note")
	}
}
