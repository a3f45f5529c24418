package fusefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The mount's root answers DaemonInfoXattr from memory, even over one
// stored on the backing directory: it is how a client finds the daemon. It
// is not listed, not settable, and not on any other node.
func TestDaemonInfoXattr(t *testing.T) {
	info := []byte(`{"socket":"/run/x.sock","pid":42}`)
	m := mountT(t, func(o *Options) { o.DaemonInfo = info })
	list := make([]byte, 1024)
	if n, _ := unix.Listxattr(m.mnt, list); containsName(list[:max(n, 0)], DaemonInfoXattr) {
		t.Fatalf("listxattr lists %s", DaemonInfoXattr)
	}
	if err := unix.Lsetxattr(m.backing, DaemonInfoXattr, []byte("stored"), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, err := unix.Getxattr(m.mnt, DaemonInfoXattr, buf)
	if err != nil || string(buf[:n]) != string(info) {
		t.Fatalf("getxattr on the root: %q %v", buf[:max(n, 0)], err)
	}
	if size, err := unix.Getxattr(m.mnt, DaemonInfoXattr, nil); err != nil || size != len(info) {
		t.Fatalf("size query: %d %v", size, err)
	}
	if _, err := unix.Getxattr(m.mnt, DaemonInfoXattr, make([]byte, 3)); !errors.Is(err, unix.ERANGE) {
		t.Fatalf("short buffer: %v, want ERANGE", err)
	}
	if err := unix.Setxattr(m.mnt, DaemonInfoXattr, []byte("x"), 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("setxattr: %v, want EPERM", err)
	}
	if err := unix.Removexattr(m.mnt, DaemonInfoXattr); !errors.Is(err, unix.EPERM) {
		t.Fatalf("removexattr: %v, want EPERM", err)
	}
	if err := os.Mkdir(filepath.Join(m.mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Getxattr(filepath.Join(m.mnt, "d"), DaemonInfoXattr, buf); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("getxattr below the root: %v, want ENODATA", err)
	}
}

func containsName(list []byte, name string) bool {
	for _, s := range splitNul(list) {
		if s == name {
			return true
		}
	}
	return false
}

func splitNul(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		out = append(out, string(b[:i]))
		b = b[min(i+1, len(b)):]
	}
	return out
}
