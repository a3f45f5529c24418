package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handle is an open file. Reads go straight to the backing descriptor;
// every operation that changes bytes runs under the file's versionstore lock
// and owes the file a version, which a flush or fsync after a write, or the
// last writer's release, commits — attributed to the last process that
// wrote through it. A handle open for writing counts in the mount's writers
// from its open to its release.
//
// In passthrough mode (passthrough_linux.go) the kernel reads and writes the
// backing file itself: a handle open for writing owes a version from its
// open, its fsyncs commit one and its release, the last of the file's
// writers', commits the last, attributed to the process that opened it.
type handle struct {
	*fs.LoopbackFile
	fd       int
	n        *node
	pt       bool // passthrough
	readOnly bool // opened O_RDONLY

	mu      sync.Mutex
	ro      int  // passthrough, a writer: a read-only descriptor of the file, or -1
	writing bool // counted in the mount's writers
	wrote   bool // bytes were written since the last commit
	writer  versionstore.Writer
}

// PassthroughFd gives the kernel the backing file to read and write the
// file through, in passthrough mode. go-fuse asks on the file's first open
// only, and the kernel opens the backing file anew for every open, with that
// open's flags; what it keeps of this descriptor is the file it names. A
// writer gives a read-only descriptor of its file, so the files the kernel
// holds open for writing are the writers' own, gone when they are.
func (h *handle) PassthroughFd() (int, bool) {
	if !h.pt {
		return 0, false
	}
	if h.readOnly {
		return h.fd, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ro < 0 {
		ro, err := reopenReadOnly(h.fd)
		if err != nil {
			// Still passthrough (a refusal now would fail the file's next
			// passthrough open): the last writer's release then sees this
			// descriptor as a writer until go-fuse lets go of it.
			h.n.fsys.log.Warn("passthrough: no read-only descriptor", "err", err)
			return h.fd, true
		}
		h.ro = ro
	}
	return h.ro, true
}

func newHandle(n *node, fd int, flags uint32) *handle {
	return &handle{LoopbackFile: fs.NewLoopbackFile(fd).(*fs.LoopbackFile), fd: fd, n: n, ro: -1,
		pt: n.fsys.Passthrough(), readOnly: flags&syscall.O_ACCMODE == syscall.O_RDONLY}
}

// openFlags are the FOPEN flags of an open handle h: none of its closes
// needs a FLUSH — a reader's commits nothing and a passthrough writer's
// could not tell whether bytes were written — unless h is a writer whose
// WRITEs the daemon sees.
func (h *handle) openFlags() uint32 {
	if h.readOnly || h.pt {
		return fuse.FOPEN_NOFLUSH
	}
	return 0
}

var _ = (fs.FileReleaser)((*handle)(nil))

func (h *handle) Release(ctx context.Context) syscall.Errno {
	if !h.pt {
		h.commit(true, -1)
		h.n.noteSelf()      // closing a written file is an event too
		h.n.keepCache(h.fd) // the kernel's pages match what was written through it
		return h.LoopbackFile.Release(ctx)
	}
	// In passthrough mode the last writer's release asks whether the file
	// is still open for writing elsewhere, which this handle's own
	// descriptor must not count as: it is closed first, and a read-only
	// one kept for the question.
	ro := -1
	if !h.readOnly {
		h.mu.Lock()
		ro, h.ro = h.ro, -1
		h.mu.Unlock()
		if ro < 0 {
			ro, _ = reopenReadOnly(h.fd)
		}
	}
	errno := h.LoopbackFile.Release(ctx)
	h.n.noteSelf()
	h.commit(true, ro)
	return errno
}

// closeRO closes h's read-only descriptor, if it has one.
func (h *handle) closeRO() {
	h.mu.Lock()
	ro := h.ro
	h.ro = -1
	h.mu.Unlock()
	if ro >= 0 {
		unix.Close(ro)
	}
}

var _ = (fs.NodeIoctler)((*node)(nil))

// Ioctl passes on only the file attribute ioctls of lsattr and chattr.
// go-fuse's loopback file would run any ioctl a caller sends on the
// backing descriptor, as root: the filesystem checks the capabilities of
// the daemon, not of the caller, so anyone could have shut the backing
// filesystem down (EXT4_IOC_SHUTDOWN) or swapped extents with a file the
// daemon holds open (EXT4_IOC_MOVE_EXT takes a descriptor number of the
// daemon's). The kernel checks those it passes on here against the caller
// itself before they reach FUSE (its fileattr layer, Linux 5.13 and later:
// ownership, CAP_LINUX_IMMUTABLE for the immutable and append-only flags).
// Every other ioctl is ENOTTY, as a filesystem without it answers.
func (n *node) Ioctl(ctx context.Context, f fs.FileHandle, cmd uint32, arg uint64, input []byte, output []byte) (int32, syscall.Errno) {
	h, ok := f.(*handle)
	if !ok || !fileattrIoctl(cmd) {
		return 0, syscall.ENOTTY
	}
	res, errno := h.LoopbackFile.Ioctl(ctx, cmd, arg, input, output)
	if errno == 0 && fileattrSet(cmd) {
		// The flags moved the backing file's ctime; the kernel would
		// answer stat from the attributes it cached. Attributes only
		// (offset -1): the pages stay, and nothing here waits on a lock
		// the kernel holds for this request.
		n.NotifyContent(-1, 0)
	}
	return res, errno
}
