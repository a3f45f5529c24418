package unixsocket

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/toolapi"
)

// MCP sessions handed to the daemon. A harness starts `dshfs mcp` and
// talks MCP with it over its standard input and output. Relaying each call
// over the socket would add a process hop — two wake-ups — to every call,
// so `dshfs mcp` hands those two streams to the daemon instead: it asks
// POST /v1/mcp to upgrade the connection, sends the descriptors over it
// (SCM_RIGHTS), and the daemon serves the session itself. The connection
// stays open as the session's control channel: the daemon reports the
// client's initialize parameters on it, and whether the session ended or the
// daemon is going away — in which case `dshfs mcp` takes the session over.

// mcpUpgrade is the protocol POST /v1/mcp upgrades to.
const mcpUpgrade = "dshfs-mcp-fds"

// MCPRequest is the body of POST /v1/mcp.
type MCPRequest struct {
	Actor string `json:"actor,omitempty"`
	Cwd   string `json:"cwd,omitempty"`
	// StructuredContent sends each result's value as structuredContent.
	StructuredContent bool `json:"structured_content,omitempty"`
	// NameActor names the session's actor after the client at initialize
	// (MCPEvent.Actor says how); Actor is the session's until then, and
	// for a daemon that does not name actors.
	NameActor bool `json:"name_actor,omitempty"`
}

// MCPSession is a session handed to the daemon.
type MCPSession struct {
	MCPRequest
	// In and Out are the harness's streams.
	In, Out *os.File
	// Pid is the `dshfs mcp` process (its parent is the harness), 0 where
	// the platform does not say.
	Pid int
	// Initialized passes the client's initialize parameters and the
	// session's actor on to `dshfs mcp`, for it to resume the session
	// should the daemon go away.
	Initialized func(params json.RawMessage, actor string)
	// Stop is closed when the daemon begins to stop: the session takes no
	// more calls, finishes those under way and ends. Its context is done
	// only once the drain's bound has passed (Server.Shutdown).
	Stop <-chan struct{}
}

// MCPEvent is one line of the control channel.
type MCPEvent struct {
	// Initialized holds the client's initialize parameters.
	Initialized json.RawMessage `json:"initialized,omitempty"`
	// Actor is the session's actor, with Initialized.
	Actor string `json:"actor,omitempty"`
	// Done: the client ended the session.
	Done bool `json:"done,omitempty"`
	// Stopping: the daemon is going away; the session is not over.
	Stopping bool `json:"stopping,omitempty"`
}

func (s *Server) mcp(w http.ResponseWriter, r *http.Request) {
	var req MCPRequest
	if !s.decode(w, r, &req) {
		return
	}
	if err := toolapi.CheckActor(req.Actor); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if s.cfg.MCP == nil {
		writeError(w, http.StatusNotFound, "this daemon does not serve MCP sessions")
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), mcpUpgrade) {
		writeError(w, http.StatusBadRequest, "POST /v1/mcp upgrades the connection: send Connection: Upgrade and Upgrade: "+mcpUpgrade)
		return
	}
	conn, uc, err := hijackUnix(w)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sess, err := receiveStreams(conn, uc)
	if err != nil {
		s.cfg.Logger.Warn("mcp session hand-off", "err", err)
		conn.Close()
		return
	}
	sess.MCPRequest, sess.Pid = req, peerPid(uc)
	if !s.sessions.begin() {
		closeSession(conn, sess) // the server is stopping
		return
	}
	s.count("mcp")
	go s.serveMCP(conn, sess)
}

// hijackUnix takes the connection from net/http and finds the Unix socket
// under it, which the descriptors arrive on.
func hijackUnix(w http.ResponseWriter) (net.Conn, *net.UnixConn, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over")
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if buf.Reader.Buffered() > 0 {
		conn.Close()
		return nil, nil, errors.New("bytes after the upgrade request")
	}
	uc, ok := unixConnOf(conn)
	if !ok {
		conn.Close()
		return nil, nil, errors.New("not a Unix socket")
	}
	return conn, uc, nil
}

// receiveStreams answers the upgrade and receives the two descriptors.
func receiveStreams(conn net.Conn, uc *net.UnixConn) (MCPSession, error) {
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer conn.SetDeadline(time.Time{})
	head := "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + mcpUpgrade + "\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		return MCPSession{}, err
	}
	var b [1]byte
	oob := make([]byte, syscall.CmsgSpace(2*4))
	_, oobn, _, _, err := uc.ReadMsgUnix(b[:], oob)
	if err != nil {
		return MCPSession{}, fmt.Errorf("receive the streams: %w", err)
	}
	fds, err := parseRights(oob[:oobn])
	if err != nil {
		return MCPSession{}, err
	}
	if len(fds) != 2 {
		closeAll(fds)
		return MCPSession{}, fmt.Errorf("received %d descriptors, want 2", len(fds))
	}
	return MCPSession{In: pollable(fds[0], "mcp-in"), Out: pollable(fds[1], "mcp-out")}, nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("receive the streams: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := syscall.ParseUnixRights(&m)
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("receive the streams: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// pollable wraps a received descriptor for the runtime's poller, so that a
// session ending on the daemon's side is not left blocked in a read.
func pollable(fd int, name string) *os.File {
	syscall.CloseOnExec(fd)
	syscall.SetNonblock(fd, true)
	return os.NewFile(uintptr(fd), name)
}

// serveMCP runs one handed-over session and reports on its control
// channel how it ended.
func (s *Server) serveMCP(conn net.Conn, sess MCPSession) {
	defer s.sessions.done()
	defer conn.Close()
	var mu sync.Mutex
	send := func(e MCPEvent) {
		b, _ := json.Marshal(e)
		mu.Lock()
		defer mu.Unlock()
		conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		conn.Write(append(b, '\n'))
	}
	sess.Initialized = func(p json.RawMessage, actor string) { send(MCPEvent{Initialized: p, Actor: actor}) }
	sess.Stop = s.ctx.Done()
	ctx, cancel := context.WithCancel(s.callCtx)
	defer cancel()
	err := s.cfg.MCP(ctx, sess)
	sess.In.Close()
	sess.Out.Close()
	switch {
	case s.ctx.Err() != nil:
		send(MCPEvent{Stopping: true})
	case err != nil:
		s.cfg.Logger.Warn("mcp session", "actor", sess.Actor, "err", err)
		send(MCPEvent{Stopping: true})
	default:
		send(MCPEvent{Done: true})
	}
}

// MCPControl is the control channel of a session handed to the daemon.
type MCPControl struct {
	conn net.Conn
	r    *bufio.Reader
}

// Next returns the next event. io.EOF without a Done or Stopping event
// means the daemon went away.
func (m *MCPControl) Next() (MCPEvent, error) {
	line, err := m.r.ReadBytes('\n')
	if err != nil {
		return MCPEvent{}, err
	}
	var e MCPEvent
	if err := json.Unmarshal(line, &e); err != nil {
		return MCPEvent{}, fmt.Errorf("mcp control: %w", err)
	}
	return e, nil
}

// Close closes the channel; the session goes on.
func (m *MCPControl) Close() error { return m.conn.Close() }

// OpenMCP hands in and out, a harness's MCP streams, to the daemon, which
// serves the session on them. ErrNoMCP means the daemon does not take
// sessions (an older daemon): serve it in this process instead.
func (c *Client) OpenMCP(ctx context.Context, req MCPRequest, in, out *os.File) (*MCPControl, error) {
	conn, err := dialPeer(ctx, c.Socket, c.peer)
	if err != nil {
		return nil, fmt.Errorf("reach the dshfs daemon at %s: %w", c.Socket, err)
	}
	ctl, err := upgradeMCP(conn.(*net.UnixConn), req, in, out)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return ctl, nil
}

// ErrNoMCP is returned by OpenMCP when the daemon does not take sessions.
var ErrNoMCP = errors.New("the daemon does not take MCP sessions")

func upgradeMCP(uc *net.UnixConn, req MCPRequest, in, out *os.File) (*MCPControl, error) {
	uc.SetDeadline(time.Now().Add(10 * time.Second))
	body, _ := json.Marshal(req)
	hr, err := http.NewRequest(http.MethodPost, "http://dshfs/v1/mcp", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("upgrade to an MCP session: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Connection", "Upgrade")
	hr.Header.Set("Upgrade", mcpUpgrade)
	if err := hr.Write(uc); err != nil {
		return nil, fmt.Errorf("upgrade to an MCP session: %w", err)
	}
	// The control channel's events may follow the answer's head in the
	// same read: br keeps them.
	br := bufio.NewReader(uc)
	resp, err := http.ReadResponse(br, hr)
	if err != nil {
		return nil, fmt.Errorf("upgrade to an MCP session: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusSwitchingProtocols:
	case http.StatusNotFound:
		return nil, ErrNoMCP
	default:
		return nil, apiError(resp)
	}
	rights := syscall.UnixRights(int(in.Fd()), int(out.Fd()))
	if _, _, err := uc.WriteMsgUnix([]byte{0}, rights, nil); err != nil {
		return nil, fmt.Errorf("hand the streams to the daemon: %w", err)
	}
	uc.SetDeadline(time.Time{})
	return &MCPControl{conn: uc, r: br}, nil
}

// closeSession hands a session back to `dshfs mcp` unserved: the daemon is
// stopping.
func closeSession(conn net.Conn, sess MCPSession) {
	sess.In.Close()
	sess.Out.Close()
	b, _ := json.Marshal(MCPEvent{Stopping: true})
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	conn.Write(append(b, '\n'))
	conn.Close()
}
