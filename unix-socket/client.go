package unixsocket

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/dshfs/dshfs/toolapi"
)

// Client calls a dshfs daemon over its socket. It keeps at most 64
// connections (transport.go); more concurrent calls wait for one.
type Client struct {
	Socket string
	peer   *Peer // nil: whoever listens at Socket

	once sync.Once
	tr   *http.Transport
}

// NewClient returns a client for the daemon listening at socket.
func NewClient(socket string) *Client {
	return &Client{Socket: socket}
}

func (c *Client) transport() *http.Transport {
	c.once.Do(func() { c.tr = newTransport(c.Socket, c.peer) })
	return c.tr
}

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() {
	c.transport().CloseIdleConnections()
}

// Tools lists the model-facing tools.
func (c *Client) Tools(ctx context.Context) ([]ToolDef, error) {
	var out []ToolDef
	return out, c.call(ctx, http.MethodGet, "/v1/tools", nil, &out)
}

// Call runs a tool. A tool failure is a result with IsError, not an error.
func (c *Client) Call(ctx context.Context, name string, req ToolRequest) (ToolResult, error) {
	var out ToolResult
	return out, c.call(ctx, http.MethodPost, "/v1/tools/"+url.PathEscape(name), req, &out)
}

// Status reports the daemon's state.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	return out, c.call(ctx, http.MethodGet, "/v1/status", nil, &out)
}

// Mount reports where the daemon serves (the mount point, backing
// directory, socket and state directory of Status), without the counts
// that take it a read of the whole index. A daemon from before the
// fields parameter answers its whole status.
func (c *Client) Mount(ctx context.Context) (Status, error) {
	var out Status
	return out, c.call(ctx, http.MethodGet, "/v1/status?fields=mount", nil, &out)
}

// History returns the versions of path (as a tool would take it), newest first.
func (c *Client) History(ctx context.Context, cwd, path string) ([]HistoryEntry, error) {
	var out []HistoryEntry
	q := url.Values{"path": {path}}
	if cwd != "" {
		q.Set("cwd", cwd)
	}
	return out, c.call(ctx, http.MethodGet, "/v1/history?"+q.Encode(), nil, &out)
}

// APIError is a 4xx or 5xx answer.
type APIError struct {
	Code    int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("dshfs daemon: %s (HTTP %d)", e.Message, e.Code)
}

// call sends in (nil: no body) as JSON to the route and decodes a 200
// answer into out.
func (c *Client) call(ctx context.Context, method, target string, in, out any) error {
	req := request{method: method, target: target}
	if in != nil {
		var err error
		if req.body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode the request: %w", err)
		}
	}
	return c.do(ctx, req, decodeJSON(out))
}

// RegisterProcess records that pid, and everything it starts, acts for
// actor: their writes through the mount are attributed to it.
func (c *Client) RegisterProcess(ctx context.Context, actor string, pid int) error {
	var out struct{}
	return c.call(ctx, http.MethodPost, "/v1/actors/"+url.PathEscape(actor)+"/processes", ProcessRequest{Pid: pid}, &out)
}

// Log returns the workspace's changes q selects, newest first.
func (c *Client) Log(ctx context.Context, q toolapi.SessionQuery) ([]Change, error) {
	var out []Change
	return out, c.call(ctx, http.MethodGet, "/v1/log?"+sessionValues(q).Encode(), nil, &out)
}

// SessionDiff returns one unified diff of the workspace's changes q
// selects (Since must be set).
func (c *Client) SessionDiff(ctx context.Context, q toolapi.SessionQuery) (string, error) {
	b, err := c.raw(ctx, "/v1/diff?"+sessionValues(q).Encode())
	return string(b), err
}

func sessionValues(q toolapi.SessionQuery) url.Values {
	v := url.Values{"since": {q.Since}}
	if q.Since == "" {
		v = url.Values{}
	}
	for _, p := range q.Paths {
		v.Add("path", p)
	}
	if q.Cwd != "" {
		v.Set("cwd", q.Cwd)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	for _, p := range q.Exclude {
		v.Add("exclude", p)
	}
	if q.Git {
		v.Set("git", "1")
	}
	return v
}

// Show returns the bytes of path at version (b3:… or a unique hex prefix).
func (c *Client) Show(ctx context.Context, cwd, path, version string) ([]byte, error) {
	q := url.Values{"path": {path}, "version": {version}}
	if cwd != "" {
		q.Set("cwd", cwd)
	}
	return c.raw(ctx, "/v1/show?"+q.Encode())
}

// Diff returns the unified diff of path between from and to (see
// toolapi.Service.Diff for the defaults).
func (c *Client) Diff(ctx context.Context, cwd, path, from, to string) (string, error) {
	q := url.Values{"path": {path}}
	for k, v := range map[string]string{"cwd": cwd, "from": from, "to": to} {
		if v != "" {
			q.Set(k, v)
		}
	}
	b, err := c.raw(ctx, "/v1/diff?"+q.Encode())
	return string(b), err
}

// Restore puts a version of path back.
func (c *Client) Restore(ctx context.Context, req RestoreRequest) (Restored, error) {
	var out Restored
	return out, c.call(ctx, http.MethodPost, "/v1/restore", req, &out)
}

// Checkpoint records a checkpoint ("" names it cp-N).
//
// The first checkpoint reads the whole workspace: progress, if set, is told
// how far it has got.
func (c *Client) Checkpoint(ctx context.Context, name string, progress func(Progress)) (Checkpoint, error) {
	var out Checkpoint
	return out, c.stream(ctx, "/v1/checkpoints", CheckpointRequest{Name: name}, progress, &out)
}

// RemoveCheckpoint deletes the checkpoint called name.
func (c *Client) RemoveCheckpoint(ctx context.Context, name string) error {
	var out CheckpointRequest
	return c.call(ctx, http.MethodDelete, "/v1/checkpoints/"+url.PathEscape(name), nil, &out)
}

// Checkpoints lists the checkpoints, oldest first.
func (c *Client) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	var out []Checkpoint
	return out, c.call(ctx, http.MethodGet, "/v1/checkpoints", nil, &out)
}

// Rewind rewinds the workspace to a checkpoint; progress, if set, hears how
// far it has got.
func (c *Client) Rewind(ctx context.Context, req RewindRequest, progress func(Progress)) (RewindResult, error) {
	var out RewindResult
	return out, c.stream(ctx, "/v1/rewind", req, progress, &out)
}

// GC collects kept bytes nobody needs.
func (c *Client) GC(ctx context.Context, progress func(Progress)) (GCResult, error) {
	var out GCResult
	return out, c.stream(ctx, "/v1/gc", struct{}{}, progress, &out)
}

// raw GETs target and returns the body of a 200 answer.
func (c *Client) raw(ctx context.Context, target string) ([]byte, error) {
	var out []byte
	err := c.do(ctx, request{method: http.MethodGet, target: target}, func(r io.Reader) (err error) {
		out, err = io.ReadAll(r)
		return err
	})
	return out, err
}

// stream POSTs in and reads a streamed answer: progress lines, then the
// result (decoded into out) or an error.
func (c *Client) stream(ctx context.Context, target string, in any, progress func(Progress), out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode the request: %w", err)
	}
	req := request{method: http.MethodPost, target: target, body: b, accept: "application/x-ndjson"}
	return c.do(ctx, req, func(r io.Reader) error {
		dec := json.NewDecoder(r)
		for {
			var line struct {
				Progress *Progress       `json:"progress"`
				Result   json.RawMessage `json:"result"`
				Error    string          `json:"error"`
			}
			if err := dec.Decode(&line); err != nil {
				return fmt.Errorf("dshfs daemon: the answer ended early: %w", err)
			}
			switch {
			case line.Error != "":
				return fmt.Errorf("dshfs daemon: %s", line.Error)
			case line.Result != nil:
				return json.Unmarshal(line.Result, out)
			case line.Progress != nil && progress != nil:
				progress(*line.Progress)
			}
		}
	})
}
