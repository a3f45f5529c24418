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
