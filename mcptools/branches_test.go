package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
)

// The daemon's refusals (a bad or taken name, no such branch, a mount
// without branches) are the model's to correct; its failures and an
// unreachable daemon stay errors.
func TestBranchRefusal(t *testing.T) {
	down := errors.New("reach the dshfs daemon: connection refused")
	for _, tc := range []struct {
		err     error
		refused bool
	}{
		{&unixsocket.APIError{Code: http.StatusConflict, Message: `branch "a" exists`}, true},
		{&unixsocket.APIError{Code: http.StatusBadRequest, Message: "actor must be at most 256 bytes"}, true},
		{&unixsocket.APIError{Code: http.StatusNotFound, Message: "this mount serves no branches"}, true},
		{&unixsocket.APIError{Code: http.StatusInternalServerError, Message: "disk full"}, false},
		{down, false},
		{nil, false},
	} {
		err := refusal(tc.err)
		if errors.Is(err, toolapi.ErrBranchRefused) != tc.refused || (tc.err == nil) != (err == nil) {
			t.Errorf("refusal(%v) = %v, want refused %v", tc.err, err, tc.refused)
		}
	}
}

// WithBranches answers the branch tools itself and hands every other tool
// to the call it wraps.
func TestWithBranches(t *testing.T) {
	var passed []string
	inner := func(_ context.Context, tool string, _ json.RawMessage) (Outcome, error) {
		passed = append(passed, tool)
		return Outcome{Text: "inner"}, nil
	}
	call := WithBranches(inner, BranchesOf(unixsocket.NewClient("/nonexistent/dshfs.sock")))
	if o, err := call(context.Background(), toolapi.ToolRead, json.RawMessage(`{}`)); err != nil || o.Text != "inner" {
		t.Fatalf("read: %+v, %v", o, err)
	}
	if _, err := call(context.Background(), toolapi.ToolBranchList, json.RawMessage(`{}`)); err == nil {
		t.Fatal("branch_list with no daemon: no error")
	}
	if len(passed) != 1 || passed[0] != toolapi.ToolRead {
		t.Fatalf("passed on %v, want [read]", passed)
	}
}
