package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

var _ = (fs.NodeSetattrer)((*node)(nil))

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		errno := h.Setattr(ctx, in, out)
		if errno == 0 {
			// Fresh attributes, as trustworthy as a GETATTR's.
			out.SetTimeout(n.fsys.timeout)
		}
		return errno
	}
	fd, name, done, errno := n.at()
	if errno != 0 {
		return errno
	}
	defer done()
	n.noteSelf()
	if errno := n.setattrAt(ctx, fd, name, in); errno != 0 {
		return errno
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return toErrno(err)
	}
	fillAttr(&out.Attr, &st)
	out.SetTimeout(n.fsys.timeout)
	return 0
}

// setattrAt applies a SETATTR that came without an open file.
func (n *node) setattrAt(ctx context.Context, fd int, name string, in *fuse.SetAttrIn) syscall.Errno {
	if m, ok := in.GetMode(); ok {
		if err := unix.Fchmodat(fd, name, m, 0); err != nil {
			return toErrno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		if err := unix.Fchownat(fd, name, u, g, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return toErrno(err)
		}
	}
	if size, ok := in.GetSize(); ok {
		if errno := n.truncateAt(ctx, fd, name, int64(size)); errno != 0 {
			return errno
		}
	}
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if mok || aok {
		ts := []unix.Timespec{{Nsec: utimeOmit}, {Nsec: utimeOmit}}
		if aok {
			ts[0] = unix.NsecToTimespec(atime.UnixNano())
		}
		if mok {
			ts[1] = unix.NsecToTimespec(mtime.UnixNano())
		}
		if err := unix.UtimesNanoAt(fd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return toErrno(err)
		}
	}
	return 0
}

// truncateAt truncates a file by name (truncate(1), or O_TRUNC without an
// open file) and records its new version.
func (n *node) truncateAt(ctx context.Context, fd int, name string, size int64) syscall.Errno {
	key, ok := n.key()
	if !ok {
		return syscall.ENOENT
	}
	unlock := n.fsys.store.Locks().Lock(key)
	defer unlock()
	n.fsys.store.Preserve(key)
	ffd, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return toErrno(err)
	}
	if errno := n.sameInode(ffd); errno != 0 {
		unix.Close(ffd)
		return errno
	}
	err = unix.Ftruncate(ffd, size)
	unix.Close(ffd)
	if err != nil {
		return toErrno(err)
	}
	n.fsys.refresh(n, key, writer(ctx))
	return 0
}
