//go:build !linux && !darwin

package unixsocket

import (
	"errors"
	"net"
)

// peerCred fails: the platform does not say who the peer is. The server
// then relies on the socket's 0600 mode and 0700 directory (sameUser), and
// a client that must check its peer (NewClientFor) cannot connect.
func peerCred(c *net.UnixConn) (uid, pid int, err error) {
	return 0, 0, errors.ErrUnsupported
}
