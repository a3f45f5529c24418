package fusefs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A write through a shared mapping left the file's mtime and ctime as
// statx asking for the times alone (as stat(1) does) saw them before: in
// passthrough mode the mapping writes the backing file without a request,
// and the kernel answered from the attributes it had cached (xfstests
// generic/080, generic/215). Natively a mapped write updates both.
func TestMappedWriteUpdatesTimes(t *testing.T) {
	m := mountT(t, func(o *Options) { o.CacheTimeout = 30 * time.Second }) // the daemon's default
	p := filepath.Join(m.mnt, "f")
	if err := os.WriteFile(p, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	m.waitUnmarked()
	before := statTimes(t, p)
	// Past the coarse clock's tick, and past cacheRacyWindow: the open keeps
	// the kernel's cache, as it would for any file not just written.
	time.Sleep(cacheRacyWindow + 100*time.Millisecond)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A program stats the file it opened (xfs_io does, to map it): the
	// kernel keeps what that GETATTR says for as long as the reply lets it.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	b, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	_ = b[0] // a read fault, then a write fault, as a program's would be
	copy(b, "mapped")
	unix.Munmap(b)
	unix.Close(fd)
	// The kernel may still use what the open's fstat said within the
	// clock tick it was told (uncached is a nanosecond, one jiffy to it):
	// a stat sooner than that can still see the old times.
	time.Sleep(20 * time.Millisecond)
	after := statTimes(t, p)
	if after.Mtime == before.Mtime || after.Ctime == before.Ctime {
		t.Errorf("statx after a mapped write: mtime %v ctime %v, as before: not updated", after.Mtime, after.Ctime)
	}
}

// statTimes is p's mtime and ctime, asked for alone, as stat -c %Y does.
func statTimes(t *testing.T, p string) unix.Statx_t {
	t.Helper()
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_SYNC_AS_STAT, unix.STATX_MTIME|unix.STATX_CTIME, &stx); err != nil {
		t.Fatal(err)
	}
	return stx
}
