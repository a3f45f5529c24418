package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fuse"
)

// backingCheck wraps the node tree's raw filesystem to see that, in
// passthrough mode, every open got its backing file. go-fuse registers it
// after the node's Open or Create returned, and a failed registration (the
// probe at mount time makes one unlikely) turns backing files off for the
// whole connection: from then on new files are opened without passthrough,
// and an open of a file that is open with passthrough fails (EIO). Versions
// stay right either way — such opens send their writes — but the mount is
// not what it was, and the log says so, once.
type backingCheck struct {
	fuse.RawFileSystem
	f *FS
}

func (b backingCheck) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := b.RawFileSystem.Open(cancel, in, out)
	if st.Ok() {
		b.f.checkBacking(out.OpenFlags)
	}
	return st
}

func (b backingCheck) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := b.RawFileSystem.Create(cancel, in, name, out)
	if st.Ok() {
		b.f.checkBacking(out.OpenFlags)
	}
	return st
}

// checkBacking logs, once, an open in passthrough mode that got no backing
// file.
func (f *FS) checkBacking(flags uint32) {
	if flags&fuse.FOPEN_PASSTHROUGH != 0 || !f.Passthrough() || !f.backingLost.CompareAndSwap(false, true) {
		return
	}
	f.log.Error("kernel passthrough failed: a backing file could not be registered, and go-fuse stopped using them; " +
		"files already open stay passthrough, other opens of them fail with EIO until they are closed; " +
		"remount with --no-passthrough to avoid it")
}
