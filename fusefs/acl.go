package fusefs

import (
	"context"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// POSIX ACLs. Where the kernel offers it (Linux), FUSE_POSIX_ACL is
// negotiated: the kernel then enforces the ACLs it reads with GETXATTR
// (system.posix_acl_access, cached per inode) beside the mode bits, as the
// backing filesystem would. Without it the kernel checked the mode bits
// alone, and an entry denying a named user was ignored through the mount.
//
// It also makes the kernel leave the caller's umask to the filesystem
// (with FUSE_DONT_MASK): a parent's default ACL, not the umask, decides a
// new entry's permissions. The backing filesystem applies the default ACL
// itself when the daemon (umask 0) creates the entry; where the parent has
// none, the daemon applies the caller's umask (createMode). go-fuse's node
// API does not pass CREATE's, MKDIR's and MKNOD's umask on, so umasks takes
// it from the request and keeps it, for the request's duration, under the
// request's cancel channel, which is the node's context's Done channel.

// umasks wraps the node tree's raw filesystem and remembers the umask of
// each create request in flight.
type umasks struct {
	fuse.RawFileSystem
	f *FS
}

func (u umasks) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer u.f.keepUmask(cancel, in.Umask)()
	return u.RawFileSystem.Create(cancel, in, name, out)
}

func (u umasks) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer u.f.keepUmask(cancel, in.Umask)()
	return u.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (u umasks) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer u.f.keepUmask(cancel, in.Umask)()
	return u.RawFileSystem.Mknod(cancel, in, name, out)
}

// requestUmasks maps a request's cancel channel to its caller's umask.
type requestUmasks struct{ m sync.Map }

// keepUmask remembers umask for the request whose cancel channel is cancel
// until the returned function runs.
func (f *FS) keepUmask(cancel <-chan struct{}, umask uint32) func() {
	if umask == 0 {
		return func() {}
	}
	f.umasks.m.Store(cancel, umask)
	return func() { f.umasks.m.Delete(cancel) }
}

// createMode is the mode the daemon creates an entry of mode with in the
// directory dirfd for the request of ctx: the caller's umask is cleared
// from it unless the directory has a default ACL, which the backing
// filesystem applies instead (as it would to a local process).
func (f *FS) createMode(ctx context.Context, dirfd int, mode uint32) uint32 {
	umask, ok := f.umasks.m.Load(ctx.Done())
	if !ok || hasDefaultACL(dirfd) {
		return mode
	}
	return mode &^ umask.(uint32)
}
