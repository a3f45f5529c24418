//go:build !linux

package integration

import "golang.org/x/sys/unix"

// mntDetach is the flag of a cleanup's last-resort unmount: there is no
// lazy unmount outside Linux, a forced one comes closest.
const mntDetach = unix.MNT_FORCE
