package unixsocket

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Who is at the other end of the socket, for both ends. The daemon serves
// only its own user and root (sameUser). A client that found the socket
// through a mount (the daemon package's registry) talks only to the
// daemon that mount's record names (NewClientFor): another user can make
// a mount that names any socket and pid, so before anything is sent on a
// connection the socket file must belong to the mount's user and the
// process that accepted it must run as that user, with that pid.

// Peer is the process a client expects at the other end of its socket.
type Peer struct {
	UID int // its user, who also owns the socket file
	Pid int // its process id
}

// ErrWrongPeer is wrapped by a client's errors when the socket, or the
// process at its other end, is not the Peer the client was made for.
var ErrWrongPeer = errors.New("not the expected daemon")

// NewClientFor returns a client for the daemon listening at socket that
// sends nothing on a connection before checking that it reached peer.
func NewClientFor(socket string, peer Peer) *Client {
	return &Client{Socket: socket, peer: &peer}
}

// sameUser reports whether the peer runs as this process's user, or as
// root. Where the platform does not say, it relies on the socket's 0600
// mode in its 0700 directory.
func sameUser(c *net.UnixConn) bool {
	uid, _, err := peerCred(c)
	if errors.Is(err, errors.ErrUnsupported) {
		return true
	}
	return err == nil && (uid == os.Getuid() || uid == 0)
}

// peerPid is the peer's process id, 0 if unknown.
func peerPid(c *net.UnixConn) int {
	_, pid, _ := peerCred(c)
	return pid
}

// dialPeer connects to socket; with a peer, only to that peer.
func dialPeer(ctx context.Context, socket string, peer *Peer) (net.Conn, error) {
	if peer != nil {
		if err := peer.ownsSocket(socket); err != nil {
			return nil, err
		}
	}
	c, err := dial(ctx, socket)
	if err != nil || peer == nil {
		return c, err
	}
	if err := peer.answers(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", socket)
}

// ownsSocket checks that socket is a socket file of p's user: a user who
// can make a mount name any path must not be connected to at all.
func (p *Peer) ownsSocket(socket string) error {
	fi, err := os.Lstat(socket)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%s is not a socket: %w", socket, ErrWrongPeer)
	case !ok || int(st.Uid) != p.UID:
		return fmt.Errorf("%s belongs to uid %d, not %d: %w", socket, st.Uid, p.UID, ErrWrongPeer)
	}
	return nil
}

// answers checks that the process at the other end of c is p.
func (p *Peer) answers(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a Unix socket: %w", ErrWrongPeer)
	}
	uid, pid, err := peerCred(uc)
	switch {
	case err != nil:
		return fmt.Errorf("cannot tell who serves the socket (%v): %w", err, ErrWrongPeer)
	case uid != p.UID:
		return fmt.Errorf("the socket is served by uid %d, not %d: %w", uid, p.UID, ErrWrongPeer)
	case pid != p.Pid:
		return fmt.Errorf("the socket is served by pid %d, not %d: %w", pid, p.Pid, ErrWrongPeer)
	}
	return nil
}

// unixConnOf is the Unix socket under c, as the server wraps it.
func unixConnOf(c net.Conn) (*net.UnixConn, bool) {
	if cc, ok := c.(*countedConn); ok {
		c = cc.Conn // the caller keeps closing the wrapper: the cap counts it
	}
	uc, ok := c.(*net.UnixConn)
	return uc, ok
}

type peerUIDKey struct{}

// withPeerUID puts the uid of c's peer in ctx, for the handlers of the
// requests it carries.
func withPeerUID(ctx context.Context, c net.Conn) context.Context {
	uid := uint32(os.Getuid())
	if uc, ok := unixConnOf(c); ok {
		if u, _, err := peerCred(uc); err == nil {
			uid = uint32(u)
		}
	}
	return context.WithValue(ctx, peerUIDKey{}, uid)
}

// peerUIDOf is the uid of the peer whose request ctx belongs to: the
// daemon's own if unknown, which only root and the daemon's user reach.
func peerUIDOf(ctx context.Context) uint32 {
	if uid, ok := ctx.Value(peerUIDKey{}).(uint32); ok {
		return uid
	}
	return uint32(os.Getuid())
}

// Listen creates the socket at path: its directory 0700, the socket 0600.
// An existing socket file is replaced only after a dial proves nobody
// listens on it; anything else at path is an error. Connections from
// another user are refused where the platform says who the peer is.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another dshfs is serving this socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return &peerListener{Listener: l}, nil
}

// peerListener drops connections from other users.
type peerListener struct{ net.Listener }

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if uc, ok := c.(*net.UnixConn); ok && !sameUser(uc) {
			c.Close()
			continue
		}
		return c, nil
	}
}
