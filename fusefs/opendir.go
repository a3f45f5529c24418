package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Zero-message opendir. Walks like `find`, `du` and `git status` open every
// directory; with the listings cached by the kernel, the OPENDIR and
// RELEASEDIR round trips were nearly all of a warm walk's cost. Answering
// OPENDIR with ENOSYS makes Linux stop sending OPENDIR and RELEASEDIR for
// good and open directories itself, with the listing cache on
// (FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR, what dshfs asked for anyway). The
// kernel then fills a listing it has not cached with READDIR(PLUS) requests
// that carry no handle; dirStreams serves each from a directory stream of
// the node tree opened for that request and positioned at its offset.
//
// No stream outlives its request: the kernel may forget a directory node
// whenever no file of its is open, and a stream kept for it would refer to
// a node that no longer exists.

// dirStreams wraps the node tree's raw filesystem.
type dirStreams struct {
	fuse.RawFileSystem
}

// OpenDir tells the kernel to open directories without asking.
func (d dirStreams) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return fuse.ENOSYS
}

func (d dirStreams) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return d.read(cancel, in, out, d.RawFileSystem.ReadDir)
}

func (d dirStreams) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return d.read(cancel, in, out, d.RawFileSystem.ReadDirPlus)
}

type readDirFunc func(<-chan struct{}, *fuse.ReadIn, *fuse.DirEntryList) fuse.Status

// read serves a handle-less READDIR(PLUS) from a stream opened for it; the
// bridge seeks the stream to the requested offset.
func (d dirStreams) read(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList, read readDirFunc) fuse.Status {
	if in.Fh != 0 {
		return read(cancel, in, out) // opened before the kernel stopped asking
	}
	var open fuse.OpenOut
	if st := d.RawFileSystem.OpenDir(cancel, &fuse.OpenIn{InHeader: in.InHeader, Flags: in.Flags}, &open); !st.Ok() {
		return st
	}
	defer d.RawFileSystem.ReleaseDir(&fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: in.NodeId}, Fh: open.Fh})
	req := *in
	req.Fh = open.Fh
	return read(cancel, &req, out)
}
