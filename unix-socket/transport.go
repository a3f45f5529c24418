package unixsocket

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// The client's transport is net/http's, dialling the socket (through the
// peer check, for a client made by NewClientFor). What it is set to do:
//
//   - At most maxClientConns connections at once, well under the
//     connections a daemon serves (DefaultMaxConns): more concurrent calls
//     wait for one rather than have the daemon refuse them.
//   - An idle connection is kept idleLimit, well under the server's idle
//     timeout, so a pooled connection is rarely one the server is closing;
//     one the server closed (a daemon restarted) is dropped and the request
//     sent on a new one, and a POST the daemon received is never sent
//     twice (net/http retries only requests nothing of which was written).
//   - A body over askFirst asks before it is sent (Expect: 100-continue):
//     a daemon that refuses it (over its limit, 413) answers at once, the
//     body is never sent, and the client reads the answer rather than a
//     broken pipe.

const (
	maxClientConns = 64
	maxIdleConns   = 16
	idleLimit      = 30 * time.Second
	askFirst       = 1 << 20
)

func newTransport(socket string, peer *Peer) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialPeer(ctx, socket, peer)
		},
		MaxConnsPerHost:       maxClientConns,
		MaxIdleConnsPerHost:   maxIdleConns,
		IdleConnTimeout:       idleLimit,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// request is one request a client sends.
type request struct {
	method, target string
	body           []byte // JSON; nil: no body
	accept         string // an Accept header, if set
}

// send makes req and returns the answer if it is a 200; any other is an
// *APIError, its body read. The caller closes the answer's body.
func (c *Client) send(ctx context.Context, req request) (*http.Response, error) {
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, "http://dshfs"+req.target, body)
	if err != nil {
		return nil, fmt.Errorf("make the request: %w", err)
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
		if len(req.body) > askFirst {
			hr.Header.Set("Expect", "100-continue")
		}
	}
	if req.accept != "" {
		hr.Header.Set("Accept", req.accept)
	}
	resp, err := c.transport().RoundTrip(hr)
	if err != nil {
		return nil, fmt.Errorf("reach the dshfs daemon at %s: %w", c.Socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, apiError(resp)
	}
	return resp, nil
}

// do makes req and hands the body of a 200 answer to read. The rest of the
// body is read before the connection goes back to the pool.
func (c *Client) do(ctx context.Context, req request, read func(io.Reader) error) error {
	resp, err := c.send(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := read(resp.Body); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// apiError is the error of a 4xx or 5xx answer. The body of every such
// answer is an ErrorBody: this is where the client reads it.
func apiError(resp *http.Response) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read the daemon's answer: %w", err)
	}
	var e ErrorBody
	json.Unmarshal(b, &e)
	return &APIError{Code: resp.StatusCode, Message: e.Error}
}

// decodeJSON returns a reader for do that decodes a JSON answer into out.
func decodeJSON(out any) func(io.Reader) error {
	return func(r io.Reader) error {
		if err := json.NewDecoder(r).Decode(out); err != nil {
			return fmt.Errorf("dshfs daemon: bad answer: %w", err)
		}
		return nil
	}
}
