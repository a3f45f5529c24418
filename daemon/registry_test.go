package daemon

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// pick chooses the mount a command means: the one at --mount's mount point
// or holding its path; the caller's mount holding the path (its mount point
// or backing directory, the deepest); else the one holding the working
// directory, else the caller's only one. Another user's mount is chosen
// only by its mount point, never by the source its maker picked.
func TestPick(t *testing.T) {
	mnt := func(mp, backing string) Entry {
		return Entry{MountPoint: mp, Backing: backing, Record: Record{Socket: mp + ".sock"}}
	}
	others := func(mp, backing string) Entry {
		return Entry{MountPoint: mp, Backing: backing, UID: 65534, Err: errOtherUser}
	}
	a, b, nested := mnt("/mnt/a", "/src/a"), mnt("/mnt/b", "/src/b"), mnt("/mnt/a/deep", "/src/deep")
	// Another user's mounts, made before a and b, whose sources are a's
	// mount point and a directory of a's backing directory.
	spoofA, spoofSrc, alien := others("/tmp/x", "/mnt/a"), others("/tmp/y", "/src/a/sub"), others("/home/c/mnt", "/home/c/ws")
	for _, tc := range []struct {
		name      string
		all       []Entry
		q         Query
		want      string // the mount point chosen, or "" for an error
		wantErr   error
		wantInMsg string
	}{
		{"path in a mount point", []Entry{a, b}, Query{Path: "/mnt/b/x.txt", WD: "/"}, "/mnt/b", nil, ""},
		{"path in a backing directory", []Entry{a, b}, Query{Path: "/src/a/d/x.txt", WD: "/"}, "/mnt/a", nil, ""},
		{"the mount point itself", []Entry{a, b}, Query{Path: "/mnt/a", WD: "/"}, "/mnt/a", nil, ""},
		{"the deepest of nested mounts", []Entry{a, nested}, Query{Path: "/mnt/a/deep/x", WD: "/"}, "/mnt/a/deep", nil, ""},
		{"a path in no mount", []Entry{a}, Query{Path: "/elsewhere/x", WD: "/mnt/a"}, "", ErrNoMount, "no dshfs mount holds /elsewhere/x"},
		{"a prefix is not a parent", []Entry{a}, Query{Path: "/mnt/ab/x", WD: "/"}, "", ErrNoMount, "no dshfs mount holds"},
		{"no path: the working directory's", []Entry{a, b}, Query{WD: "/src/b/sub"}, "/mnt/b", nil, ""},
		{"no path, outside: the only mount", []Entry{b}, Query{WD: "/"}, "/mnt/b", nil, ""},
		{"no path, outside, two mounts", []Entry{a, b}, Query{WD: "/"}, "", ErrNoMount, "/ is in none of your 2 running dshfs mounts; name one with --mount"},
		{"no path, no mount", nil, Query{WD: "/"}, "", ErrNoMount, "no dshfs mount of yours is running"},
		{"--mount: a mount point", []Entry{a, b}, Query{Mount: "/mnt/b", Path: "/src/a/x", WD: "/src/a"}, "/mnt/b", nil, ""},
		{"--mount: a backing directory", []Entry{a, b}, Query{Mount: "/src/b", WD: "/"}, "/mnt/b", nil, ""},
		{"--mount: another user's mount point", []Entry{alien, a}, Query{Mount: "/home/c/mnt", WD: "/"}, "/home/c/mnt", nil, ""},
		{"a source naming a mount point", []Entry{spoofA, a}, Query{Mount: "/mnt/a", WD: "/"}, "/mnt/a", nil, ""},
		{"a source naming a mount point, path", []Entry{spoofA, a}, Query{Path: "/mnt/a/x", WD: "/"}, "/mnt/a", nil, ""},
		{"a source inside a backing directory", []Entry{spoofSrc, a}, Query{Path: "/src/a/sub/x", WD: "/"}, "/mnt/a", nil, ""},
		{"a source inside, working directory", []Entry{spoofSrc, a}, Query{WD: "/src/a/sub"}, "/mnt/a", nil, ""},
		{"others' mounts are not the only one", []Entry{spoofA, spoofSrc, a}, Query{WD: "/"}, "/mnt/a", nil, ""},
		{"others' sources hold nothing", []Entry{spoofSrc}, Query{Path: "/src/a/sub/x", WD: "/"}, "", ErrNoMount, "no dshfs mount holds"},
		{"a path in another user's mount point", []Entry{alien}, Query{Path: "/home/c/mnt/x", WD: "/"}, "/home/c/mnt", nil, ""},
	} {
		e, err := pick(tc.all, tc.q)
		switch {
		case tc.want != "" && (err != nil || e.MountPoint != tc.want):
			t.Errorf("%s: picked %q, %v; want %q", tc.name, e.MountPoint, err, tc.want)
		case tc.want == "" && (!errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantInMsg)):
			t.Errorf("%s: %v, want %v with %q", tc.name, err, tc.wantErr, tc.wantInMsg)
		}
	}
}

// Only the caller's own mounts are read, and another user's when root
// names its mount point; the mount table's source is the backing
// directory, whatever the record says.
func TestListMountsReadsOwnMounts(t *testing.T) {
	ms := []systemMount{{MountPoint: "/nonexistent/a", Backing: "/src/a", UID: 1000}, {MountPoint: "/nonexistent/b", Backing: "/src/b", UID: 65534}}
	for _, tc := range []struct {
		uid   int
		named string
		read  [2]bool
	}{
		{1000, "", [2]bool{true, false}},
		{1000, "/nonexistent/b", [2]bool{true, false}},
		{0, "", [2]bool{false, false}},
		{0, "/nonexistent/b", [2]bool{false, true}},
		{65534, "", [2]bool{false, true}},
	} {
		all := listMounts(ms, tc.uid, tc.named)
		for i, e := range all {
			if read := e.Err != errOtherUser; read != tc.read[i] || e.Backing != ms[i].Backing {
				t.Errorf("uid %d, named %q: %s read %v (%v), backing %s; want read %v", tc.uid, tc.named, e.MountPoint, read, e.Err, e.Backing, tc.read[i])
			}
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
		{errOtherUser, "belongs to uid 1000", "another user's mount"},
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
