package daemon

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// pick chooses the mount a command means: the one holding the path (its
// mount point or backing directory, the deepest), else the one holding the
// working directory, else the only one on the machine.
func TestPick(t *testing.T) {
	mnt := func(mp, backing string) Entry {
		return Entry{MountPoint: mp, Backing: backing, Record: Record{Socket: mp + ".sock"}}
	}
	a, b, nested := mnt("/mnt/a", "/src/a"), mnt("/mnt/b", "/src/b"), mnt("/mnt/a/deep", "/src/deep")
	for _, tc := range []struct {
		name      string
		all       []Entry
		path, wd  string
		want      string // the mount point chosen, or "" for an error
		wantErr   error
		wantInMsg string
	}{
		{"path in a mount point", []Entry{a, b}, "/mnt/b/x.txt", "/", "/mnt/b", nil, ""},
		{"path in a backing directory", []Entry{a, b}, "/src/a/d/x.txt", "/", "/mnt/a", nil, ""},
		{"the mount point itself", []Entry{a, b}, "/mnt/a", "/", "/mnt/a", nil, ""},
		{"the deepest of nested mounts", []Entry{a, nested}, "/mnt/a/deep/x", "/", "/mnt/a/deep", nil, ""},
		{"a path in no mount", []Entry{a}, "/elsewhere/x", "/mnt/a", "", ErrNoMount, "no dshfs mount holds /elsewhere/x"},
		{"a prefix is not a parent", []Entry{a}, "/mnt/ab/x", "/", "", ErrNoMount, "no dshfs mount holds"},
		{"no path: the working directory's", []Entry{a, b}, "", "/src/b/sub", "/mnt/b", nil, ""},
		{"no path, outside: the only mount", []Entry{b}, "", "/", "/mnt/b", nil, ""},
		{"no path, outside, two mounts", []Entry{a, b}, "", "/", "", ErrNoMount, "/ is in none of the 2 running dshfs mounts; name one with --mount"},
		{"no path, no mount", nil, "", "/", "", ErrNoMount, "no dshfs mount is running"},
	} {
		e, err := pick(tc.all, tc.path, tc.wd)
		switch {
		case tc.want != "" && (err != nil || e.MountPoint != tc.want):
			t.Errorf("%s: picked %q, %v; want %q", tc.name, e.MountPoint, err, tc.want)
		case tc.want == "" && (!errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantInMsg)):
			t.Errorf("%s: %v, want %v with %q", tc.name, err, tc.wantErr, tc.wantInMsg)
		}
	}
}

// A mount whose record cannot be read is found, but its daemon is not
// reachable, with the reason and what to do.
func TestReachable(t *testing.T) {
	e := Entry{MountPoint: "/mnt/a", Backing: "/src/a", UID: 1000}
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
		if err := e.Reachable(); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %v with %q", tc.err, err, ErrUnreachable, tc.want)
		}
		if got := e.Note(); got != tc.note {
			t.Errorf("%v: note %q, want %q", tc.err, got, tc.note)
		}
	}
	if e.Err = nil; e.Reachable() != nil || e.Note() != "" {
		t.Error("a readable record is reachable, with no note")
	}
}
