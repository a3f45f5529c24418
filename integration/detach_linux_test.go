package integration

import "golang.org/x/sys/unix"

// mntDetach is the flag of a cleanup's last-resort unmount: lazy, so a
// mount still busy goes too.
const mntDetach = unix.MNT_DETACH
