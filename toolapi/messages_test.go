package toolapi

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// The store's failures of the socket's own timeline operations reach
// people in words, not as the store's data.
func TestDescribeWordsTimelineFailures(t *testing.T) {
	for _, tc := range []struct {
		verb string
		err  error
		want string
	}{
		{"rewind", &versionstore.Error{Code: versionstore.CodeAborted, Reason: versionstore.ReasonAborted, Op: "rewind"}, "rewind aborted"},
		{"checkpoint", &versionstore.Error{Code: versionstore.CodeAborted, Reason: versionstore.ReasonAborted}, "checkpoint aborted"},
		{"gc", &versionstore.Error{Code: versionstore.CodeIOError, Reason: versionstore.ReasonIO, Op: "sync", Path: "/ws/f", Err: syscall.EIO},
			`cannot sync "/ws/f": input/output error`},
		{"checkpoint", versionstore.ErrCheckpointExists, "exists"}, // not the store's *Error: as it is
	} {
		if got := Describe(tc.verb, tc.err).Error(); got != tc.want {
			t.Errorf("Describe(%q, %v) = %q, want %q", tc.verb, tc.err, got, tc.want)
		}
		if !errors.Is(Describe(tc.verb, tc.err), tc.err) {
			t.Errorf("Describe(%q, %v) lost its cause", tc.verb, tc.err)
		}
	}
}

// A rewind's conflicts are worded for the report as they always read.
func TestWordRewind(t *testing.T) {
	res := versionstore.RewindResult{Actions: []versionstore.RewindAction{
		{Path: "a", Op: "restore"},
		{Path: "b", Op: "restore", Err: versionstore.ErrBeingWritten},
		{Path: "c", Op: "restore", Err: &versionstore.Error{Reason: versionstore.ReasonWouldLose, Op: "restore", Path: "c", Err: versionstore.ErrWouldLose}},
		{Path: "d", Op: "restore", Err: &versionstore.Error{Code: versionstore.CodeStaleVersion, Reason: versionstore.ReasonChanged, Op: "restore", Path: "d"}},
		{Path: "e", Op: "restore", Err: &versionstore.Error{Reason: versionstore.ReasonOwnerChanged, Op: "restore", Path: "e"}},
		{Path: "f/g", Op: "restore", Err: &versionstore.Error{Reason: versionstore.ReasonDirOwner, Op: "restore", Path: "f/g"}},
	}}
	WordRewind(&res)
	want := []string{"", "being written through the mount",
		`cannot restore "c": ` + versionstore.ErrWouldLose.Error(),
		`cannot restore "d": file changed since it was read`,
		`cannot restore "e": another user owns it now than when it had these bytes, and putting them back would hand them over`,
		`cannot restore "f/g": its directory belongs to another user now, who could take the bytes put back there`}
	for i, a := range res.Actions {
		if a.Error != want[i] {
			t.Errorf("%s: %q, want %q", a.Path, a.Error, want[i])
		}
	}
}

// The index failing to record a walk's findings or a rewind's change (a
// full disk under the state directory) reads as one sentence with a hint.
func TestDescribeIndexFailure(t *testing.T) {
	cause := &fs.PathError{Op: "write", Path: "/state/index.db", Err: syscall.ENOSPC}
	for _, c := range []struct {
		verb string
		err  *versionstore.Error
		want string
	}{
		{"checkpoint", &versionstore.Error{Code: versionstore.CodeIOError, Reason: versionstore.ReasonIndex, Op: "checkpoint", Err: cause},
			"checkpoint failed: the index could not record the change (no space left on device); make room where dshfs keeps its state, then retry"},
		{"rewind", &versionstore.Error{Code: versionstore.CodeIOError, Reason: versionstore.ReasonIndex, Op: "rewind", Path: "f.txt", Err: cause},
			`cannot rewind "f.txt": the index could not record the change (no space left on device); make room where dshfs keeps its state, then retry`},
		{"write", &versionstore.Error{Code: versionstore.CodeIOError, Reason: versionstore.ReasonIndex, Op: "write", Path: "/ws/f.txt", Err: cause},
			`cannot write "/ws/f.txt": the index could not record the change (no space left on device); make room where dshfs keeps its state, then retry`},
		{"edit", &versionstore.Error{Code: versionstore.CodeIOError, Reason: versionstore.ReasonIndex, Path: "/ws/f.txt", Err: cause},
			`cannot edit "/ws/f.txt": the index could not record the change (no space left on device); make room where dshfs keeps its state, then retry`},
	} {
		if got := Describe(c.verb, c.err).Error(); got != c.want {
			t.Errorf("%s: %q, want %q", c.verb, got, c.want)
		}
	}
}

// A tool refused because a process holds the file open for writing through
// the mount says who, and to retry once it is closed: nothing changed, so a
// re-read would not help.
func TestDescribeMountWriting(t *testing.T) {
	busy := func(op string, by versionstore.Writer) error {
		return &versionstore.Error{Code: versionstore.CodeStaleVersion, Reason: versionstore.ReasonMountWriting, Op: op, Path: "/ws/f.txt", By: by}
	}
	python := versionstore.Writer{Kind: versionstore.WriterMount, Pid: 4242, Comm: "python3"}
	for _, c := range []struct {
		verb string
		err  error
		want string
	}{
		{"edit", busy("", python), `cannot edit "/ws/f.txt": file is being written by pid 4242 (python3) — retry after it closes`},
		{"write", busy("write", python), `cannot write "/ws/f.txt": file is being written by pid 4242 (python3) — retry after it closes`},
		{"write", busy("write", versionstore.Writer{}), `cannot write "/ws/f.txt": file is being written through the mount — retry after it closes`},
		{"write", busy("write", versionstore.Writer{Pid: 9, Comm: "a)\n"}), `cannot write "/ws/f.txt": file is being written by pid 9 ("a)\n") — retry after it closes`},
		{"restore", busy("restore", python), `cannot restore "/ws/f.txt": file is being written by pid 4242 (python3)`},
	} {
		if got := Describe(c.verb, c.err).Error(); got != c.want {
			t.Errorf("%s: %q, want %q", c.verb, got, c.want)
		}
	}
}
