package daemon

import (
	"syscall"
	"testing"
)

// A soft descriptor limit below the hard one is raised to it (Go raises it
// at start-up already; this is what the daemon does where that failed),
// and one already raised is left alone.
func TestRaiseFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max < 512 {
		t.Skipf("hard limit %d: nothing to lower the soft one to", orig.Max)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	low := syscall.Rlimit{Cur: 256, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	cur, err := raiseFileLimit()
	var now syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now)
	if err != nil || cur != capFileLimit(orig.Max) || now.Cur != cur {
		t.Fatalf("raised to %d (now %d), %v; want %d", cur, now.Cur, err, capFileLimit(orig.Max))
	}
	if cur, err := raiseFileLimit(); err != nil || cur != now.Cur {
		t.Fatalf("second raise: %d %v", cur, err)
	}
}
