package fusefs

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Attributes the kernel must not cache at all. A file written behind the
// kernel (writtenBehind) has its attributes answered with no validity: the
// kernel then asks for them at every stat, statx asking for the times alone
// included. go-fuse reads a zero timeout as "unset" and puts the mount's
// in its place, so the node answers uncached, a nanosecond, and
// uncachedAttrs turns that into zero on the way out. A nanosecond was not
// enough: the kernel rounds it up to one tick of its clock (4 ms at
// HZ=250), within which a program that wrote through a mapping and then
// ran stat(1) (xfstests' generic/080) read the times from before.
//
// A CREATE's reply keeps its nanosecond: the attributes of the file just
// made are fresh, and with none at all the kernel refreshed them before the
// first write, a GETATTR more for every file extracted (9 requests a file
// became 10). A mapping written within one tick of the create can still
// leave a stat seeing the create's times.

// uncached is the timeout the node answers for attributes that must not be
// cached.
const uncached = time.Nanosecond

// uncachedAttrs wraps the node tree's raw filesystem and sends a zero
// attribute validity where the node answered uncached to a GETATTR,
// SETATTR or LOOKUP.
type uncachedAttrs struct {
	fuse.RawFileSystem
}

func (u uncachedAttrs) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	st := u.RawFileSystem.GetAttr(cancel, in, out)
	zeroUncached(&out.AttrValid, &out.AttrValidNsec)
	return st
}

func (u uncachedAttrs) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	st := u.RawFileSystem.SetAttr(cancel, in, out)
	zeroUncached(&out.AttrValid, &out.AttrValidNsec)
	return st
}

func (u uncachedAttrs) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	st := u.RawFileSystem.Lookup(cancel, h, name, out)
	zeroUncached(&out.AttrValid, &out.AttrValidNsec)
	return st
}

// zeroUncached makes an attribute validity of uncached zero.
func zeroUncached(sec *uint64, nsec *uint32) {
	if *sec == 0 && *nsec == uint32(uncached) {
		*nsec = 0
	}
}
