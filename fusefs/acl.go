package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
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
// none, the daemon applies the caller's umask (createMode). And setting an
// access ACL must clear the set-group-ID bit of a file whose group the
// caller is not in (the kernel says so with FUSE_SETXATTR_EXT's
// SETXATTR_ACL_KILL_SGID): the backing filesystem does not, the daemon
// being root, so the daemon does (clearSGID).
//
// go-fuse's node API passes on neither CREATE's, MKDIR's and MKNOD's umask
// nor SETXATTR's extended flags, so aclRequests takes them from the
// request and keeps them, for the request's duration, under the request's
// cancel channel, which is the node's context's Done channel.

// aclRequests wraps the node tree's raw filesystem and remembers what the
// node API does not pass on of the requests in flight.
type aclRequests struct {
	fuse.RawFileSystem
	f *FS
}

func (u aclRequests) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer u.f.keepFacts(cancel, requestFacts{umask: in.Umask})()
	return u.RawFileSystem.Create(cancel, in, name, out)
}

func (u aclRequests) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer u.f.keepFacts(cancel, requestFacts{umask: in.Umask})()
	return u.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (u aclRequests) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer u.f.keepFacts(cancel, requestFacts{umask: in.Umask})()
	return u.RawFileSystem.Mknod(cancel, in, name, out)
}

// requestFacts is what aclRequests keeps of a request.
type requestFacts struct {
	umask    uint32 // the caller's, of a create
	killSGID bool   // a SETXATTR of an access ACL must clear set-group-ID
}

// inFlight maps a request's cancel channel to its requestFacts.
type inFlight struct{ m sync.Map }

// keepFacts remembers facts for the request whose cancel channel is cancel
// until the returned function runs.
func (f *FS) keepFacts(cancel <-chan struct{}, facts requestFacts) func() {
	if facts == (requestFacts{}) {
		return func() {}
	}
	f.inFlight.m.Store(cancel, facts)
	return func() { f.inFlight.m.Delete(cancel) }
}

// factsOf is what aclRequests kept of the request of ctx.
func (f *FS) factsOf(ctx context.Context) requestFacts {
	facts, _ := f.inFlight.m.Load(ctx.Done())
	r, _ := facts.(requestFacts)
	return r
}

// createMode is the mode the daemon creates an entry of mode with in the
// directory dirfd for the request of ctx: the caller's umask is cleared
// from it unless the directory has a default ACL, which the backing
// filesystem applies instead (as it would to a local process).
func (f *FS) createMode(ctx context.Context, dirfd int, mode uint32) uint32 {
	umask := f.factsOf(ctx).umask
	if umask == 0 || hasDefaultACL(dirfd) {
		return mode
	}
	return mode &^ umask
}

// clearSGID clears the set-group-ID bit of r, whose access ACL the request
// of ctx has just set, if the kernel asked for it. chmod keeps the ACL: its
// mask is the group bits, which do not change.
func (f *FS) clearSGID(ctx context.Context, r nodeRef, attr string) error {
	if attr != "system.posix_acl_access" || !f.factsOf(ctx).killSGID {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil || st.Mode&syscall.S_ISGID == 0 {
		return err
	}
	return r.chmod(uint32(st.Mode) & 0o7777 &^ syscall.S_ISGID)
}
