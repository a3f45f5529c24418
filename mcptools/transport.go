package mcptools

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport carries a session over in and out, newline-delimited JSON as
// on stdio, and answers every request read before the end of in: a client
// may write its requests and close its end at once (`dshfs mcp <
// requests.jsonl`). The SDK's connection stops writing as soon as its
// reader reports the end, so the end is held back until each request read
// has had its response written.
func Transport(in io.ReadCloser, out io.WriteCloser) mcp.Transport {
	return &answering{inner: &mcp.IOTransport{Reader: in, Writer: out}}
}

type answering struct{ inner mcp.Transport }

func (t *answering) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	c := &answeringConn{Connection: conn, open: map[jsonrpc.ID]bool{}}
	c.answered = sync.NewCond(&c.mu)
	return c, nil
}

// answeringConn counts the requests read and not answered yet.
type answeringConn struct {
	mcp.Connection
	mu       sync.Mutex
	open     map[jsonrpc.ID]bool
	closed   bool
	answered *sync.Cond
}

func (c *answeringConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.ID.IsValid() {
		c.mu.Lock()
		c.open[req.ID] = true
		c.mu.Unlock()
	}
	if errors.Is(err, io.EOF) {
		c.awaitAnswers(ctx)
	}
	return msg, err
}

// awaitAnswers waits until every request read is answered, the connection
// is closed or ctx ends.
func (c *answeringConn) awaitAnswers(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.answered.Broadcast()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.open) > 0 && !c.closed {
		c.answered.Wait()
	}
}

func (c *answeringConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.done(func() { delete(c.open, resp.ID) })
	}
	if err != nil {
		c.done(func() { c.closed = true }) // nothing more can be answered
	}
	return err
}

func (c *answeringConn) Close() error {
	c.done(func() { c.closed = true })
	return c.Connection.Close()
}

// done changes the state under the lock and wakes the reader.
func (c *answeringConn) done(change func()) {
	c.mu.Lock()
	change()
	c.mu.Unlock()
	c.answered.Broadcast()
}
