package unixsocket

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred is the uid (LOCAL_PEERCRED) and pid (LOCAL_PEERPID) of the
// process at the other end of c, as the kernel recorded them.
func peerCred(c *net.UnixConn) (uid, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Xucred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		if cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED); cerr == nil {
			pid, cerr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
		}
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return 0, 0, err
	}
	return int(cred.Uid), pid, nil
}
