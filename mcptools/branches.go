package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/dshfs/dshfs/toolapi"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
)

// WithBranches serves the branch tools (toolapi.BranchDefinitions) from b
// beside the tools call serves.
func WithBranches(call CallFunc, b toolapi.Branches) CallFunc {
	return func(ctx context.Context, tool string, args json.RawMessage) (Outcome, error) {
		if !toolapi.IsBranchTool(tool) {
			return call(ctx, tool, args)
		}
		res, err := toolapi.CallBranchTool(ctx, b, tool, toolapi.Request{Arguments: args})
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Text: res.Text, IsError: res.IsError, Value: res.Value}, nil
	}
}

// BranchesOf is the branches of the workspace client's daemon serves.
func BranchesOf(client *unixsocket.Client) toolapi.Branches { return clientBranches{client} }

type clientBranches struct{ c *unixsocket.Client }

func (b clientBranches) List(ctx context.Context) ([]toolapi.Branch, error) {
	list, err := b.c.Branches(ctx)
	if err != nil {
		return nil, refusal(err)
	}
	out := make([]toolapi.Branch, len(list))
	for i, info := range list {
		out[i] = branchOf(info)
	}
	return out, nil
}

func (b clientBranches) New(ctx context.Context, name, actor string) (toolapi.Branch, error) {
	info, err := b.c.NewBranch(ctx, name, actor)
	return branchOf(info), refusal(err)
}

func (b clientBranches) Diff(ctx context.Context, name string) (versionstore.MergeResult, error) {
	res, err := b.c.BranchDiff(ctx, name)
	return res, refusal(err)
}

func (b clientBranches) Merge(ctx context.Context, name string, partial bool) (versionstore.MergeResult, error) {
	res, err := b.c.MergeBranch(ctx, name, partial)
	return res, refusal(err)
}

func branchOf(info unixsocket.BranchInfo) toolapi.Branch {
	return toolapi.Branch{Name: info.Name, Actor: info.Actor, Dir: info.MountPoint, Checkpoint: info.Checkpoint,
		Created: info.Created, Changed: info.Changed, Conflicts: info.Conflicts, Note: info.Note}
}

// refusal marks the daemon's answers to a request it will not do as asked
// (a bad or taken name, no such branch, a mount without branches): the
// model's to correct. Anything else stays the error it is.
func refusal(err error) error {
	var api *unixsocket.APIError
	if !errors.As(err, &api) {
		return err
	}
	switch api.Code {
	case http.StatusConflict, http.StatusBadRequest, http.StatusNotFound:
		return fmt.Errorf("%w: %s", toolapi.ErrBranchRefused, api.Message)
	}
	return err
}
