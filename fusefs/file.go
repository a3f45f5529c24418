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

// mutate runs op, which changes the file's bytes, under the file's lock
// and owes the file a version. A file no longer in the tree (unlinked while
// open) has no version to keep, so op just runs.
func (h *handle) mutate(ctx context.Context, op func() syscall.Errno) syscall.Errno {
	key, unlock, ok := h.n.fsys.writers.lock(h.n)
	defer unlock()
	if !ok {
		return op()
	}
	h.changed(ctx, key, true)
	h.n.fsys.noteSelfKey(key)
	return op()
}

// changed notes a change through h at key (wrote: of bytes, rather than an
// open for writing or a create). The first counts h among the file's
// writers; the writer is the last caller with a pid (writeback and mmap
// writes come from the kernel, pid 0). Callers hold key's lock.
func (h *handle) changed(ctx context.Context, key string, wrote bool) {
	h.mu.Lock()
	first := !h.writing
	h.writing = true
	h.wrote = h.wrote || wrote
	// The command name is read from /proc only when the writing process
	// changes, not on every WRITE.
	if c, ok := fuse.FromContext(ctx); h.writer.Kind == "" || ok && c.Pid != 0 && c.Pid != h.writer.Pid {
		h.writer = h.n.fsys.actors.attribute(writer(ctx))
	}
	h.mu.Unlock()
	if !first {
		h.n.fsys.writers.owe(h.n)
		return
	}
	if _, writing := h.n.fsys.writers.keyOf(h.n); !writing {
		// The file's first writer: the bytes before are kept, and recorded
		// as what was there, before the file counts as being written.
		h.n.fsys.store.Preserve(key)
	}
	h.n.fsys.writers.begin(h.n, key, wrote)
}

// commit records the file's version if a change through the mount is owed.
// The store rehashes the bytes on disk, so what is committed is exactly
// what is there. A flush or fsync commits only after bytes were written
// through h: a shell redirect closes a duplicate of the new descriptor
// before writing, and the empty file it would record is not a version
// anyone meant. In passthrough mode an fsync commits, and the version stays
// owed: more may be written unseen. The last writer's release commits
// whatever is owed (ro: see endWriting); until then the file is being
// written.
func (h *handle) commit(release bool, ro int) {
	h.mu.Lock()
	counted, wrote, w := h.writing, h.wrote, h.writer
	h.wrote = false
	if release {
		h.writing = false
	}
	h.mu.Unlock()
	switch {
	case counted && release:
		h.n.fsys.endWriting(h.n, w, ro)
		return
	case counted && h.pt:
		h.n.fsys.commitWriting(h.n, w, true)
	case counted && wrote:
		h.n.fsys.commitWriting(h.n, w, false)
	}
	if ro >= 0 {
		unix.Close(ro)
	}
}

// abandon drops a handle the kernel never received (its open failed after
// it was counted among the writers): the version owed is committed and the
// descriptor closed. Callers hold key's lock.
func (h *handle) abandon(key string, w versionstore.Writer) {
	h.mu.Lock()
	counted := h.writing
	h.writing = false
	h.mu.Unlock()
	if counted {
		h.n.fsys.endWritingLocked(h.n, w, -1)
	}
	h.closeRO()
	unix.Close(h.fd)
}

var _ = (fs.FileWriter)((*handle)(nil))

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	var n uint32
	errno := h.mutate(ctx, func() syscall.Errno {
		var e syscall.Errno
		n, e = h.LoopbackFile.Write(ctx, data, off)
		return e
	})
	return n, errno
}

var _ = (fs.FileSetattrer)((*handle)(nil))

func (h *handle) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var errno syscall.Errno
	if _, ok := in.GetSize(); !ok {
		errno = h.LoopbackFile.Setattr(ctx, in, out)
	} else {
		errno = h.mutate(ctx, func() syscall.Errno { return h.LoopbackFile.Setattr(ctx, in, out) })
	}
	if errno != 0 || !killsPriv(ctx, in) {
		return errno
	}
	var st unix.Stat_t
	if err := unix.Fstat(h.fd, &st); err != nil {
		return toErrno(err)
	}
	changed, errno := killPriv(ctx, &st, func(mode uint32) error { return unix.Fchmod(h.fd, mode) })
	if errno != 0 || !changed {
		return errno
	}
	return h.LoopbackFile.Getattr(ctx, out)
}

var _ = (fs.FileAllocater)((*handle)(nil))

func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	return h.mutate(ctx, func() syscall.Errno { return h.LoopbackFile.Allocate(ctx, off, size, mode) })
}

var _ = (fs.FileFlusher)((*handle)(nil))

func (h *handle) Flush(ctx context.Context) syscall.Errno {
	errno := h.LoopbackFile.Flush(ctx)
	h.commit(false, -1)
	return errno
}

var _ = (fs.FileFsyncer)((*handle)(nil))

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	errno := h.LoopbackFile.Fsync(ctx, flags)
	h.commit(false, -1)
	return errno
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

var _ = (fs.NodeOpener)((*node)(nil))

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fd, name, done, errno := n.at()
	if errno != 0 {
		return nil, 0, errno
	}
	defer done()
	// The kernel supplies O_APPEND offsets itself; O_NOFOLLOW keeps a
	// symlink swapped into the backing tree from redirecting the open.
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	trunc := flags&syscall.O_TRUNC != 0
	writable := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	var key string
	keyed := false
	if writable {
		// A writer holding the file open blocks tool mutations until it
		// closes: a tool's publish would leave its later writes in the
		// replaced inode, lost. So the open itself runs under the file's
		// lock, or a publish could swap the name's inode between the open
		// and the count.
		n.fsys.writers.moves.RLock()
		defer n.fsys.writers.moves.RUnlock()
		var unlock func()
		key, unlock, keyed = n.fsys.writers.lock(n)
		defer unlock()
	}
	ffd, err := unix.Openat(fd, name, int(flags&^syscall.O_TRUNC)|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, toErrno(err)
	}
	if errno := n.sameInode(ffd); errno != 0 {
		unix.Close(ffd)
		return nil, 0, errno
	}
	h := newHandle(n, ffd, flags)
	if writable {
		if keyed {
			h.changed(ctx, key, h.pt) // a passthrough writer's writes are unseen: owed from now
			n.fsys.noteSelfKey(key)
		}
		// Truncation by O_TRUNC (with ATOMIC_O_TRUNC it comes here, not as
		// a SETATTR) is a write too.
		if trunc {
			if err := unix.Ftruncate(ffd, 0); err != nil {
				if keyed {
					h.abandon(key, writer(ctx))
				} else {
					unix.Close(ffd)
				}
				return nil, 0, toErrno(err)
			}
		}
	}
	if !h.pt && n.keepCache(ffd) {
		return h, h.openFlags() | fuse.FOPEN_KEEP_CACHE, 0
	}
	return h, h.openFlags(), 0
}

var _ = (fs.NodeCopyFileRanger)((*node)(nil))

// CopyFileRange copies in the backing filesystem, as `cp` within the mount
// asks; the destination is written like any other write.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode,
	fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	in, ok1 := fhIn.(*handle)
	dst, ok2 := fhOut.(*handle)
	if !ok1 || !ok2 {
		return 0, syscall.ENOTSUP
	}
	var copied int
	errno := dst.mutate(ctx, func() syscall.Errno {
		var err error
		copied, err = copyFileRange(in.fd, int64(offIn), dst.fd, int64(offOut), int(length), int(flags))
		return toErrno(err)
	})
	return uint32(copied), errno
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
	return h.LoopbackFile.Ioctl(ctx, cmd, arg, input, output)
}
