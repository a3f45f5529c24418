package testfuse

import "time"

// WaitFor polls cond until it holds or within has passed, and says whether
// it held. It is for what the kernel or a daemon does after a system call
// returns (RELEASE after close, an inotify event after a change, a
// daemon's exit), where there is nothing to wait on but the outcome. The
// mount tests' one sleep is here.
func WaitFor(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 20*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
}
