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

// uncached is the timeout the node answers for attributes that must not be
// cached.
const uncached = time.Nanosecond

// uncachedAttrs wraps the node tree's raw filesystem and sends a zero
// attribute validity where the node answered uncached.
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

func (u uncachedAttrs) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := u.RawFileSystem.Create(cancel, in, name, out)
	zeroUncached(&out.AttrValid, &out.AttrValidNsec)
	return st
}

// zeroUncached makes an attribute validity of uncached zero.
func zeroUncached(sec *uint64, nsec *uint32) {
	if *sec == 0 && *nsec == uint32(uncached) {
		*nsec = 0
	}
}
