package fusefs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// chattr changed the backing file's flags, and so its ctime, but stat
// through the mount kept answering the ctime the kernel had cached
// (xfstests generic/277). Natively a flag change moves ctime.
func TestChattrUpdatesCtime(t *testing.T) {
	m := mountT(t, func(o *Options) { o.CacheTimeout = 30 * time.Second }) // the daemon's default
	p := filepath.Join(m.mnt, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitUnmarked()
	var before unix.Stat_t
	if err := unix.Stat(p, &before); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // past the coarse clock's tick
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatalf("lsattr (the backing filesystem has no file flags?): %v", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags|fsNodumpFl); err != nil {
		t.Fatalf("chattr +d: %v", err)
	}
	var after unix.Stat_t
	if err := unix.Stat(p, &after); err != nil {
		t.Fatal(err)
	}
	if after.Ctim == before.Ctim {
		t.Errorf("ctime after chattr +d: %d.%09d, as before", after.Ctim.Sec, after.Ctim.Nsec)
	}
}

// fsNodumpFl is FS_NODUMP_FL (linux/fs.h): chattr +d, which an owner may set.
const fsNodumpFl = 0x40
