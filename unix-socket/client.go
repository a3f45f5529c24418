package unixsocket

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/dshfs/dshfs/toolapi"
)

// Client calls a dshfs daemon over its socket. It keeps at most 64
// connections for tool calls and 64 for the other routes; more concurrent
// calls wait for one.
type Client struct {
	Socket string
	hc     *http.Client
	calls  *connPool // tool calls: see conn.go
}

// NewClient returns a client for the daemon listening at socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 16,
		MaxConnsPerHost:     maxClientConns,
	}
	return &Client{Socket: socket, hc: &http.Client{Transport: tr}, calls: &connPool{socket: socket}}
}

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() {
	c.hc.CloseIdleConnections()
	c.calls.close()
}

// Tools lists the model-facing tools.
func (c *Client) Tools(ctx context.Context) ([]ToolDef, error) {
	var out []ToolDef
	return out, c.do(ctx, http.MethodGet, "/v1/tools", nil, &out)
}

// Call runs a tool. A tool failure is a result with IsError, not an error.
func (c *Client) Call(ctx context.Context, name string, req ToolRequest) (ToolResult, error) {
	var out ToolResult
	b, ok := appendToolRequest(make([]byte, 0, 64+len(req.Actor)+len(req.Cwd)+len(req.Arguments)), req)
	if !ok {
		var err error
		if b, err = json.Marshal(req); err != nil {
			return out, err
		}
	}
	err := c.calls.post(ctx, "/v1/tools/"+url.PathEscape(name), b, func(b []byte) error { return decodeToolResult(b, &out) })
	var apiErr *APIError
	if err != nil && !errors.As(err, &apiErr) {
		err = fmt.Errorf("reach the dshfs daemon at %s: %w", c.Socket, err)
	}
	return out, err
}

// Status reports the daemon's state.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	return out, c.do(ctx, http.MethodGet, "/v1/status", nil, &out)
}

// History returns the versions of path (as a tool would take it), newest first.
func (c *Client) History(ctx context.Context, cwd, path string) ([]HistoryEntry, error) {
	var out []HistoryEntry
	q := url.Values{"path": {path}}
	if cwd != "" {
		q.Set("cwd", cwd)
	}
	return out, c.do(ctx, http.MethodGet, "/v1/history?"+q.Encode(), nil, &out)
}

// APIError is a 4xx or 5xx answer.
type APIError struct {
	Code    int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("dshfs daemon: %s (HTTP %d)", e.Message, e.Code)
}

// readAPIError is the error a 4xx or 5xx answer's body describes.
func readAPIError(resp *http.Response) error {
	var e ErrorBody
	json.NewDecoder(resp.Body).Decode(&e)
	return &APIError{Code: resp.StatusCode, Message: e.Error}
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://dshfs"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("reach the dshfs daemon at %s: %w", c.Socket, err)
	}
	defer func() {
		io.Copy(io.Discard, resp.Body) // to EOF, so the connection is reused
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return readAPIError(resp)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// RegisterProcess records that pid, and everything it starts, acts for
// actor: their writes through the mount are attributed to it.
func (c *Client) RegisterProcess(ctx context.Context, actor string, pid int) error {
	var out struct{}
	return c.do(ctx, http.MethodPost, "/v1/actors/"+url.PathEscape(actor)+"/processes", ProcessRequest{Pid: pid}, &out)
}

// Log returns the workspace's changes q selects, newest first.
func (c *Client) Log(ctx context.Context, q toolapi.SessionQuery) ([]Change, error) {
	var out []Change
	return out, c.do(ctx, http.MethodGet, "/v1/log?"+sessionValues(q).Encode(), nil, &out)
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
	return out, c.do(ctx, http.MethodPost, "/v1/restore", req, &out)
}

// Checkpoint records a checkpoint ("" names it cp-N).
//
// The first checkpoint reads the whole workspace: progress, if set, is told
// how far it has got.
func (c *Client) Checkpoint(ctx context.Context, name string, progress func(Progress)) (Checkpoint, error) {
	var out Checkpoint
	return out, c.stream(ctx, "/v1/checkpoints", CheckpointRequest{Name: name}, progress, &out)
}

// Checkpoints lists the checkpoints, oldest first.
func (c *Client) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	var out []Checkpoint
	return out, c.do(ctx, http.MethodGet, "/v1/checkpoints", nil, &out)
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

// raw GETs path and returns the body of a 200 answer.
func (c *Client) raw(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://dshfs"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the dshfs daemon at %s: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, readAPIError(resp)
	}
	return io.ReadAll(resp.Body)
}

// stream POSTs body and reads a streamed answer: progress lines, then the
// result (decoded into out) or an error.
func (c *Client) stream(ctx context.Context, path string, body any, progress func(Progress), out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://dshfs"+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("reach the dshfs daemon at %s: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readAPIError(resp)
	}
	dec := json.NewDecoder(resp.Body)
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
}
