package testfuse

import (
	"time"

	"golang.org/x/sys/unix"
)

// NextCoarseTick returns once the kernel's coarse clock, which stamps file
// times, has ticked: a time the kernel sets after it differs from one set
// before.
func NextCoarseTick() {
	var start, now unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &start)
	WaitFor(time.Second, func() bool {
		unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now)
		return now != start
	})
}
