package daemon

import "syscall"

// raiseFileLimit lifts the soft limit on open descriptors to the hard one,
// and returns the soft limit in force. The daemon holds a descriptor per
// socket connection (up to unixsocket.DefaultMaxConns), per open file of
// the mount and per tool call in flight; a soft limit of 1024 (Linux's
// default) or 256 (macOS's) is reached long before the hard one.
//
// Since Go 1.19 the syscall package already does this when the process
// starts, on Linux and macOS alike (syscall/rlimit.go: the soft limit goes
// to the hard one less one, on macOS no higher than kern.maxfilesperproc),
// and puts the old limit back for the processes it starts. So this only
// acts where that failed, and otherwise leaves the limit alone: calling
// Setrlimit would also make the children (fusermount3) inherit the raised
// limit.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur+1 >= lim.Max {
		return lim.Cur, nil // Go raised it already (or the hard limit is the soft one)
	}
	want := lim
	want.Cur = capFileLimit(lim.Max)
	if want.Cur <= lim.Cur {
		return lim.Cur, nil
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return lim.Cur, err
	}
	return want.Cur, nil
}
