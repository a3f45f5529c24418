package unixsocket

import (
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// sameUser reports whether the peer runs as this process's user (or root).
func sameUser(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return false
	}
	return int(cred.Uid) == os.Getuid() || cred.Uid == 0
}

// peerPid is the peer's process id, 0 if unknown.
func peerPid(c *net.UnixConn) int {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) { cred, _ = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cred == nil {
		return 0
	}
	return int(cred.Pid)
}

// peerUID is the peer's user id.
func peerUID(c *net.UnixConn) (uint32, bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) { cred, _ = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cred == nil {
		return 0, false
	}
	return cred.Uid, true
}
