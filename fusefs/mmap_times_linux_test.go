package fusefs

import (
	"fmt"
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
	mp := startMapperT(t) // before the open: from the fstat to the stat takes a few round trips, not a start
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
	err = mappedWrite(mp, fd, "mapped")
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	// At once, as xfs_io then stat(1) do: the open's fstat was given no
	// validity at all (uncached.go). The mapper's round trips take about
	// the kernel's tick that one nanosecond became, so this passed with it
	// too at times; TestStatOfAFileWrittenBehindAsksEveryTime pins the zero.
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

// While a file is written behind the kernel (open for writing, in
// passthrough mode), every statx asking for its times alone reaches the
// daemon: the attributes it answers carry no validity at all.
func TestStatOfAFileWrittenBehindAsksEveryTime(t *testing.T) {
	var r requests
	m := mountT(t, counting(&r))
	if !m.fs.Passthrough() {
		t.Skip("files are written behind the kernel only in passthrough mode")
	}
	p := filepath.Join(m.mnt, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	statTimes(t, p)
	r.take()
	const stats = 5
	for range stats {
		statTimes(t, p)
	}
	if n := r.take()["GETATTR"]; n < stats {
		t.Errorf("%d statx calls sent %d GETATTR requests, want one each", stats, n)
	}
}

// startMapperT starts the mapper process (fsx_test.go) and stops it at
// cleanup. Mappings of the mount are made there: in this process, which
// serves the mount, a fault waiting on a READ could deadlock against a stop
// of the world (it did, without passthrough).
func startMapperT(t *testing.T) *fsxMapper {
	t.Helper()
	mp, err := startMapper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mp.stop(); err != nil {
			t.Error(err)
		}
	})
	return mp
}

// mappedWrite has mp map fd's first 4 KiB shared, read and write data
// through the mapping (a read fault, then a write fault, as a program's
// would be) and unmap it.
func mappedWrite(mp *fsxMapper, fd int, data string) error {
	m := &fsxMap{id: 1}
	for _, c := range []struct {
		op   byte
		a, b int64
		data string
		fd   int
	}{
		{mapperMap, 0, 4096, "", fd},
		{mapperRead, 0, 1, "", -1},
		{mapperWrite, 0, 0, data, -1},
		{mapperUnmap, 0, 0, "", -1},
	} {
		if _, err := mp.call(c.op, m, c.a, c.b, []byte(c.data), c.fd); err != nil {
			return fmt.Errorf("mapper %c: %w", c.op, err)
		}
	}
	return nil
}
