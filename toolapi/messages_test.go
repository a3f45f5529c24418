package toolapi

import (
	"errors"
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
	}}
	WordRewind(&res)
	want := []string{"", "being written through the mount",
		`cannot restore "c": ` + versionstore.ErrWouldLose.Error(),
		`cannot restore "d": file changed since it was read`}
	for i, a := range res.Actions {
		if a.Error != want[i] {
			t.Errorf("%s: %q, want %q", a.Path, a.Error, want[i])
		}
	}
}
