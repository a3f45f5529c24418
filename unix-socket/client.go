package unixsocket

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
)

// Client calls a dshfs daemon over its socket.
type Client struct {
	Socket string
	hc     *http.Client
}

// NewClient returns a client for the daemon listening at socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 16,
	}
	return &Client{Socket: socket, hc: &http.Client{Transport: tr}}
}

// Tools lists the model-facing tools.
func (c *Client) Tools(ctx context.Context) ([]ToolDef, error) {
	var out []ToolDef
	return out, c.do(ctx, http.MethodGet, "/v1/tools", nil, &out)
}

// Call runs a tool. A tool failure is a result with IsError, not an error.
func (c *Client) Call(ctx context.Context, name string, req ToolRequest) (ToolResult, error) {
	var out ToolResult
	return out, c.do(ctx, http.MethodPost, "/v1/tools/"+url.PathEscape(name), req, &out)
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
		var e ErrorBody
		json.NewDecoder(resp.Body).Decode(&e)
		return &APIError{Code: resp.StatusCode, Message: e.Error}
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
