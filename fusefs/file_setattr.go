package fusefs

// SETATTR: chmod, chown, utimens and truncation, with an open handle or
// without, and the set-id bits the kernel leaves to the daemon (killpriv.go).

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

var _ = (fs.NodeSetattrer)((*node)(nil))

// Setattr without an open file (chmod, chown, utimensat, truncate, and
// the truncation of an O_TRUNC open) acts on the node's inode through a
// descriptor checked to be it, never on whatever its name holds now: the
// kernel checked the caller's ownership or write permission against that
// inode's attributes (see identity.go).
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		errno := h.Setattr(ctx, in, out)
		if errno == 0 {
			// Fresh attributes, as trustworthy as a GETATTR's.
			out.SetTimeout(n.attrTimeout())
		}
		return errno
	}
	r, done, errno := n.ref()
	if errno != 0 {
		return errno
	}
	defer done()
	n.noteSelf()
	if errno := n.setattrRef(ctx, r, in); errno != 0 {
		return errno
	}
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		return toErrno(err)
	}
	if killsPriv(ctx, in) {
		if changed, errno := killPriv(ctx, &st, r.chmod); errno != 0 {
			return errno
		} else if changed {
			if err := unix.Fstat(r.fd, &st); err != nil {
				return toErrno(err)
			}
		}
	}
	fillAttr(&out.Attr, &st)
	out.SetTimeout(n.attrTimeout())
	return 0
}

// setattrRef applies a SETATTR that came without an open file to r. One
// that sets nothing is a chown(-1, -1), which still changes the inode's
// ctime (the kernel forwards no ctime without a writeback cache), or the
// kernel's word before a write that clears set-id bits (killpriv.go); both
// move ctime natively.
func (n *node) setattrRef(ctx context.Context, r nodeRef, in *fuse.SetAttrIn) syscall.Errno {
	if setsNothing(in) {
		return toErrno(r.chown(-1, -1))
	}
	if m, ok := in.GetMode(); ok {
		if err := r.chmod(m); err != nil {
			return toErrno(err)
		}
	}
	if u, g, ok := setattrOwner(in); ok {
		if err := r.chown(u, g); err != nil {
			return toErrno(err)
		}
	}
	if size, ok := in.GetSize(); ok {
		if errno := n.truncateRef(ctx, r, int64(size)); errno != 0 {
			return errno
		}
	}
	if ts := setattrTimes(in); ts != nil {
		return toErrno(r.utimes(ts))
	}
	return 0
}

// setattrOwner is the chown argument for in's owner and group (-1 for one
// it leaves), ok false if it sets neither.
func setattrOwner(in *fuse.SetAttrIn) (uid, gid int, ok bool) {
	u, uok := in.GetUID()
	g, gok := in.GetGID()
	uid, gid = -1, -1
	if uok {
		uid = int(u)
	}
	if gok {
		gid = int(g)
	}
	return uid, gid, uok || gok
}

// setattrTimes is the utimensat argument for in's times, nil if it sets
// none.
func setattrTimes(in *fuse.SetAttrIn) []unix.Timespec {
	atime, aok := in.GetATime()
	mtime, mok := in.GetMTime()
	if !aok && !mok {
		return nil
	}
	ts := []unix.Timespec{{Nsec: utimeOmit}, {Nsec: utimeOmit}}
	if aok {
		ts[0] = unix.NsecToTimespec(atime.UnixNano())
	}
	if mok {
		ts[1] = unix.NsecToTimespec(mtime.UnixNano())
	}
	return ts
}

// truncateRef truncates the file r (truncate(1), or O_TRUNC without an
// open file) and records its new version. The file is opened before its
// lock is taken: the open may wait for the break of a lease another
// process holds on it, which must not stop the tools' work on the file.
func (n *node) truncateRef(ctx context.Context, r nodeRef, size int64) syscall.Errno {
	if errno := n.isFile(r.fd, ""); errno != 0 { // r is n's; not a FIFO reusing its number
		return errno
	}
	ffd, err := r.reopen(unix.O_WRONLY)
	if err != nil {
		return toErrno(err)
	}
	if errno := n.sameInode(ffd); errno != 0 { // macOS reopens by name
		unix.Close(ffd)
		return errno
	}
	defer unix.Close(ffd)
	key, unlock, ok := n.fsys.writers.lock(n)
	defer unlock()
	if !ok {
		return syscall.ENOENT
	}
	n.fsys.mount.Preserve(key)
	// A tool publish may have replaced the file since r was opened; under
	// the lock none can, and the name must still hold it.
	if errno := n.is(r.dir, r.name); errno != 0 {
		return errno
	}
	if err := unix.Ftruncate(ffd, size); err != nil {
		return toErrno(err)
	}
	n.fsys.refresh(n, key, writer(ctx))
	return 0
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
