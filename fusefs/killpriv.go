package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Set-id bits. The mount negotiates HANDLE_KILLPRIV_V2: the kernel no longer
// asks for a file's attributes before every chown, nor for its
// security.capability before every write, and leaves the clearing of the
// set-user-ID and set-group-ID bits to the daemon — which, writing as
// root with CAP_FSETID, would never have them cleared by the backing
// filesystem. So the daemon clears them, as the kernel would:
//
//   - after a chown of a file (SETATTR with FATTR_KILL_SUIDGID, which the
//     kernel sets for every chown of a non-directory);
//   - after a truncation by a caller without CAP_FSETID (the kernel sets
//     FATTR_KILL_SUIDGID then);
//   - at a write by a caller without CAP_FSETID to a file with a set-id bit:
//     the kernel announces it, before the write, with a SETATTR that sets
//     nothing (its remove-privileges path, the only one that sends one). In
//     passthrough mode it is the only word of the write the daemon gets.
//
// The set-user-ID bit is cleared; the set-group-ID bit too where the group
// may execute the file, or else (it marks mandatory locking then) where the
// caller is neither in the file's group nor has CAP_FSETID — the kernel's
// own rule (setattr_should_drop_sgid). File capabilities
// (security.capability) the kernel still removes itself, with a
// REMOVEXATTR, and still asks for before a file's first write and before
// every chown: the VFS does, whatever FUSE negotiated (docs/performance.md,
// "Requests per created file").

// killsPriv reports whether the SETATTR in asks the daemon to clear the
// file's set-id bits afterwards.
func killsPriv(ctx context.Context, in *fuse.SetAttrIn) bool {
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		return true
	}
	if !setsNothing(in) {
		return false
	}
	c, ok := fuse.FromContext(ctx)
	return ok && !capFsetid(c.Pid)
}

// setsNothing reports whether the SETATTR in sets no attribute.
func setsNothing(in *fuse.SetAttrIn) bool {
	return in.Valid&^(fuse.FATTR_FH|fuse.FATTR_LOCKOWNER|fuse.FATTR_KILL_SUIDGID) == 0
}

// killPriv clears the set-id bits of the regular file st describes for the
// caller of ctx, with chmod; it reports whether it changed anything.
func killPriv(ctx context.Context, st *unix.Stat_t, chmod func(mode uint32) error) (bool, syscall.Errno) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, 0
	}
	mode := uint32(st.Mode) & 0o7777
	kept := mode &^ unix.S_ISUID
	if mode&unix.S_ISGID != 0 && (mode&unix.S_IXGRP != 0 || !inGroupOrCapable(ctx, uint32(st.Gid))) {
		kept &^= unix.S_ISGID
	}
	if kept == mode {
		return false, 0
	}
	return true, toErrno(chmod(kept))
}

// inGroupOrCapable reports whether the caller of ctx is in group gid or
// has CAP_FSETID.
func inGroupOrCapable(ctx context.Context, gid uint32) bool {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return true
	}
	return c.Gid == gid || inGroups(c.Pid, gid) || capFsetid(c.Pid)
}
