package unixsocket

import (
	"context"
	"net"
	"os"
)

// unixConnOf is the Unix socket under c, as the server wraps it.
func unixConnOf(c net.Conn) (*net.UnixConn, bool) {
	if pc, ok := c.(*prefixConn); ok {
		c = pc.Conn
	}
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
		if u, ok := peerUID(uc); ok {
			uid = u
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
