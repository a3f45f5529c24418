package fusefs

// Changing a file's bytes through an open handle — write, fallocate,
// copy_file_range — and the commits of flush and fsync (commit.go has the
// rest).

import (
	"context"
	"syscall"

	"github.com/dshfs/dshfs/versionstore"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

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
	by := h.writer
	h.mu.Unlock()
	if !first {
		h.n.fsys.writers.owe(h.n)
		return
	}
	if _, writing := h.n.fsys.writers.keyOf(h.n); !writing {
		// The file's first writer: the bytes before are kept, and recorded
		// as what was there, before the file counts as being written.
		h.n.fsys.mount.Preserve(key)
	}
	h.n.fsys.writers.begin(h.n, key, wrote, by)
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

var _ = (fs.FileAllocater)((*handle)(nil))

func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	return h.mutate(ctx, func() syscall.Errno { return h.LoopbackFile.Allocate(ctx, off, size, mode) })
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
// it was counted among the writers): the version owed is committed, as at
// a release, and the descriptor closed.
func (h *handle) abandon(w versionstore.Writer) {
	h.mu.Lock()
	counted := h.writing
	h.writing = false
	h.mu.Unlock()
	if counted {
		h.n.fsys.endWriting(h.n, w, -1)
	}
	h.closeRO()
	// Through its *os.File: closed by number, the descriptor would be
	// closed again when the file is collected, whatever has it by then.
	h.LoopbackFile.Release(context.Background())
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
