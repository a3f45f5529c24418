package daemon

import "time"

// Holders is not known on macOS (no /proc): an unmount of a busy mount
// fails there with the system's own EBUSY.
func Holders(mnt string) []Holder { return nil }

// zombie: kill(pid, 0) fails for an exited process on macOS once reaped;
// dshfs's daemons are reaped by launchd at once.
func zombie(pid int) bool { return false }

// waitExit waits until pid has exited or the deadline passes, asking
// kill(pid, 0) every 50 ms.
func waitExit(pid int, deadline time.Time) bool { return pollExit(pid, deadline) }
