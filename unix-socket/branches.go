package unixsocket

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
)

// Branches serves a workspace's branches (docs/branches.md).
type Branches interface {
	New(name, actor string) (BranchInfo, error)
	List() ([]BranchInfo, error)
	Drop(name string, force bool) error
	Merge(ctx context.Context, name string, o versionstore.MergeOptions) (versionstore.MergeResult, error)
}

// BranchInfo describes a branch.
type BranchInfo struct {
	Name       string    `json:"name"`
	Actor      string    `json:"actor,omitempty"`
	MountPoint string    `json:"mount_point"`
	Checkpoint string    `json:"checkpoint"`
	Created    time.Time `json:"created"`
	Changed    int       `json:"changed"`        // files the branch changed
	Conflicts  int       `json:"conflicts"`      // of those, changed in the workspace too
	Note       string    `json:"note,omitempty"` // what the user should know of the new branch
}

// BranchRequest is the body of POST /v1/branches.
type BranchRequest struct {
	Name  string `json:"name"`
	Actor string `json:"actor,omitempty"`
}

// MergeRequest is the body of POST /v1/branches/{name}/merge.
type MergeRequest struct {
	Partial        bool `json:"partial,omitempty"`
	Lines          bool `json:"lines,omitempty"`           // merge a text file's changes to lines apart
	IncludeIgnored bool `json:"include_ignored,omitempty"` // merge git-ignored paths too
}

func (m MergeRequest) options() versionstore.MergeOptions {
	return versionstore.MergeOptions{Partial: m.Partial, Lines: m.Lines, IncludeIgnored: m.IncludeIgnored}
}

func (s *Server) needBranches(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Branches == nil {
			writeError(w, http.StatusNotFound, "this mount serves no branches")
			return
		}
		h(w, r)
	}
}

func (s *Server) branches(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Branches.List()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) newBranch(w http.ResponseWriter, r *http.Request) {
	var req BranchRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.Actor != "" {
		if err := toolapi.CheckActor(req.Actor); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	info, err := s.cfg.Branches.New(req.Name, req.Actor)
	if err != nil {
		writeBranchError(w, err)
		return
	}
	s.count("branch_new")
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) dropBranch(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.cfg.Branches.Drop(name, r.URL.Query().Get("force") == "true"); err != nil {
		writeBranchError(w, err)
		return
	}
	s.count("branch_drop")
	writeJSON(w, http.StatusOK, BranchRequest{Name: name})
}

func (s *Server) branchDiff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := MergeRequest{Lines: q.Get("lines") == "true", IncludeIgnored: q.Get("include_ignored") == "true"}.options()
	o.DryRun = true
	res, err := s.cfg.Branches.Merge(r.Context(), r.PathValue("name"), o)
	if err != nil {
		writeBranchError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) mergeBranch(w http.ResponseWriter, r *http.Request) {
	var req MergeRequest
	if !s.decode(w, r, &req) {
		return
	}
	res, err := s.cfg.Branches.Merge(r.Context(), r.PathValue("name"), req.options())
	if err != nil {
		writeBranchError(w, err)
		return
	}
	s.count("branch_merge")
	writeJSON(w, http.StatusOK, res)
}

// ErrBranchRefused marks a branch request refused for what it asked (HTTP
// 409); the daemon's branch errors wrap it.
var ErrBranchRefused = errors.New("branch")

func writeBranchError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, ErrBranchRefused) {
		code = http.StatusConflict
	}
	writeError(w, code, err.Error())
}

// NewBranch makes a branch of the workspace.
func (c *Client) NewBranch(ctx context.Context, name, actor string) (BranchInfo, error) {
	var out BranchInfo
	return out, c.call(ctx, http.MethodPost, "/v1/branches", BranchRequest{Name: name, Actor: actor}, &out)
}

// Branches lists the workspace's branches.
func (c *Client) Branches(ctx context.Context) ([]BranchInfo, error) {
	var out []BranchInfo
	return out, c.call(ctx, http.MethodGet, "/v1/branches", nil, &out)
}

// DropBranch deletes a branch.
func (c *Client) DropBranch(ctx context.Context, name string, force bool) error {
	q := ""
	if force {
		q = "?force=true"
	}
	var out BranchRequest
	return c.call(ctx, http.MethodDelete, "/v1/branches/"+url.PathEscape(name)+q, nil, &out)
}

// BranchDiff plans a branch's merge without applying it.
func (c *Client) BranchDiff(ctx context.Context, name string) (versionstore.MergeResult, error) {
	return c.BranchDiffWith(ctx, name, MergeRequest{})
}

// BranchDiffWith plans a branch's merge as o would make it (Partial aside),
// without applying it.
func (c *Client) BranchDiffWith(ctx context.Context, name string, o MergeRequest) (versionstore.MergeResult, error) {
	q := url.Values{}
	if o.Lines {
		q.Set("lines", "true")
	}
	if o.IncludeIgnored {
		q.Set("include_ignored", "true")
	}
	path := "/v1/branches/" + url.PathEscape(name) + "/diff"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out versionstore.MergeResult
	return out, c.call(ctx, http.MethodGet, path, nil, &out)
}

// MergeBranch merges a branch into the workspace.
func (c *Client) MergeBranch(ctx context.Context, name string, partial bool) (versionstore.MergeResult, error) {
	return c.MergeBranchWith(ctx, name, MergeRequest{Partial: partial})
}

// MergeBranchWith merges a branch into the workspace as o asks.
func (c *Client) MergeBranchWith(ctx context.Context, name string, o MergeRequest) (versionstore.MergeResult, error) {
	var out versionstore.MergeResult
	return out, c.call(ctx, http.MethodPost, "/v1/branches/"+url.PathEscape(name)+"/merge", o, &out)
}
