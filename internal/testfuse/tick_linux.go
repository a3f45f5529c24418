package testfuse

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ClockPast returns once the kernel's coarse clock is past every time
// stamped on path (its change, modification and birth times): a time the
// kernel stamps from then on is later than those. One tick of the clock is
// not always enough; file times can be finer than the clock's ticks.
func ClockPast(t testing.TB, path string) {
	t.Helper()
	var stx unix.Statx_t
	mask := unix.STATX_CTIME | unix.STATX_MTIME | unix.STATX_BTIME
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, mask, &stx); err != nil {
		t.Fatal(err)
	}
	latest := max(nanos(stx.Ctime), nanos(stx.Mtime), nanos(stx.Btime))
	var now unix.Timespec
	if !WaitFor(time.Second, func() bool {
		unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now)
		return now.Nano() > latest
	}) {
		t.Fatalf("the clock is not past %s's times after 1 s", path)
	}
}

func nanos(ts unix.StatxTimestamp) int64 { return ts.Sec*1e9 + int64(ts.Nsec) }
