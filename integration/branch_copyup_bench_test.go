//go:build linux

package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/internal/testfuse"
	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"golang.org/x/sys/unix"
)

const copyUpMiB = 100

// benchBranchCopyUp times a 1-byte append to a 100 MiB file through a
// branch whose workspace and state lie on a loop-mounted XFS image with
// reflink, against `cp --reflink=never` and `cp --reflink=always` of the
// file on the same filesystem, three rounds alternating, each append on a
// new branch. It checks that the copy-up cloned the file: the branch's
// copy shares its extents (filefrag), and the filesystem lost about none
// of its free space to it.
func benchBranchCopyUp(b *testing.B) {
	if _, err := exec.LookPath("mkfs.xfs"); err != nil {
		b.Skip("no mkfs.xfs to make a filesystem with reflink")
	}
	xfs := loopXFS(b)
	ws := &branchBenchWS{work: xfs, backing: filepath.Join(xfs, "ws"), mnt: filepath.Join(b.TempDir(), "mnt"), state: filepath.Join(xfs, "state")}
	ws.env = benchEnv(b.TempDir(), "")
	for _, d := range []string{ws.backing, ws.mnt, ws.state} {
		must(b, os.Mkdir(d, 0o755))
	}
	big := make([]byte, copyUpMiB<<20)
	rand.Read(big)
	must(b, os.WriteFile(filepath.Join(ws.backing, "big"), big, 0o644))
	ws.mount(b)
	var appendT, committed, never, always []time.Duration
	var used []int64
	for i := range 3 {
		name := fmt.Sprintf("c%d", i)
		br, _ := ws.newBranch(b, name)
		free := freeBytes(b, xfs)
		start := time.Now()
		appendT = append(appendT, ws.timed(b, br, "sh", "-c", "printf x >> big"))
		waitVersion(b, ws.branchDir(b, name), "big", copyUpMiB<<20+1)
		committed = append(committed, time.Since(start))
		upper := filepath.Join(ws.branchDir(b, name), "upper", "big")
		used = append(used, free-freeBytes(b, xfs))
		checkShared(b, upper)
		never = append(never, ws.timed(b, xfs, "cp", "--reflink=never", "ws/big", "never"+name))
		always = append(always, ws.timed(b, xfs, "cp", "--reflink=always", "ws/big", "always"+name))
	}
	load, _ := os.ReadFile("/proc/loadavg")
	pa, pn, pl := medianDuration(appendT), medianDuration(never), medianDuration(always)
	fmt.Printf("1-byte append to a %d MiB file through a branch on XFS with reflink (load average %s): %v (runs %v), until the branch's index holds its version %v (runs %v), free space it took %v bytes; "+
		"cp --reflink=never %v (runs %v); cp --reflink=always %v (runs %v); append / cp without reflink %.3f×, / cp with reflink %.2f×\n",
		copyUpMiB, strings.Join(strings.Fields(string(load))[:3], " "), pa, roundAll(appendT), medianDuration(committed), roundAll(committed), used, pn, roundAll(never), pl, roundAll(always),
		float64(pa)/float64(pn), float64(pa)/float64(pl))
	b.ReportMetric(float64(pa.Microseconds())/1000, "append-ms")
	b.ReportMetric(float64(pa)/float64(pn), "append/cp-x")
}

// loopXFS makes a 2 GiB sparse XFS image with reflink under b.TempDir(),
// mounts it through a loop device and returns where; cleanup (registered
// before any mount on it) unmounts it, which frees the loop device.
func loopXFS(b *testing.B) string {
	dir := b.TempDir()
	img, mnt := filepath.Join(dir, "xfs.img"), filepath.Join(dir, "xfs")
	must(b, os.Mkdir(mnt, 0o755))
	f, err := os.Create(img)
	must(b, err)
	must(b, f.Truncate(2<<30))
	must(b, f.Close())
	for _, args := range [][]string{{"mkfs.xfs", "-q", "-m", "reflink=1", img}, {"mount", "-o", "loop", img, mnt}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			b.Skipf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	b.Cleanup(func() {
		for range 50 {
			if err := unix.Unmount(mnt, 0); err == nil || !testfuse.Mounted(mnt) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		unix.Unmount(mnt, mntDetach)
	})
	return mnt
}

// freeBytes is the free space of the filesystem holding dir, once what
// was written is on it.
func freeBytes(b *testing.B, dir string) int64 {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(b, err)
	defer unix.Close(fd)
	must(b, unix.Syncfs(fd))
	var st unix.Statfs_t
	must(b, unix.Fstatfs(fd, &st))
	return int64(st.Bfree) * st.Bsize
}

// waitVersion waits, up to 30 s, for the index of the branch in dir to
// hold a version of rel of size bytes: the branch's mount commits a write
// at its release, which the kernel sends after close(2) has returned. (A
// file this large is versioned by its size, times and inode, not hashed.)
func waitVersion(b *testing.B, dir, rel string, size int64) {
	socket, _ := filepath.Glob(filepath.Join(dir, "state", "*.sock"))
	if len(socket) != 1 {
		b.Fatalf("the socket of the branch in %s: found %v", dir, socket)
	}
	c := unixsocket.NewClient(socket[0])
	var h []versionstore.HistoryEntry
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if h, err = c.History(context.Background(), "", rel); err == nil && len(h) > 0 && h[0].Size == size {
			return
		}
	}
	b.Fatalf("the branch in %s holds no version of %s of %d bytes: %+v, %v", dir, rel, size, h, err)
}

// checkShared fails unless the file at path shares extents with another
// (filefrag -v marks them "shared"): it was cloned, not copied.
func checkShared(b *testing.B, path string) {
	out, err := exec.Command("filefrag", "-v", path).CombinedOutput()
	if err != nil {
		b.Fatalf("filefrag -v %s: %v: %s", path, err, out)
	}
	if !strings.Contains(string(out), "shared") {
		b.Fatalf("the branch's copy of the file shares no extent: the copy-up did not clone it\n%s", out)
	}
}
