package fusefs

import (
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// defaultViewCacheTimeout is how long the kernel may trust a branch
// view's entries and attributes, unless told otherwise. Nothing but the
// branch's own mount changes the view, through the view's mount, where
// the kernel sees each change: the snapshot below it does not change (a
// file the workspace changes after the branch point is served from its
// bytes then, the same as before). With 1 s, every open through the
// branch's mount of a file last looked up more than a second before
// crossed the view twice (a LOOKUP, then the OPEN).
const defaultViewCacheTimeout = 30 * time.Second

// mountView serves root, a branch view's root node, at mnt.
func mountView(mnt string, root fs.InodeEmbedder, o BranchViewOptions) (*fuse.Server, error) {
	timeout, zero := o.CacheTimeout, time.Duration(0)
	if timeout == 0 {
		timeout = defaultViewCacheTimeout
	}
	opts := &fs.Options{EntryTimeout: &timeout, AttrTimeout: &timeout, NegativeTimeout: &zero, NullPermissions: true}
	opts.MountOptions = fuse.MountOptions{FsName: "dshfs-branch", Name: "dshfs-branch", DirectMount: os.Geteuid() == 0,
		Options: []string{"default_permissions"}, MaxWrite: 1 << 20, Debug: o.Debug,
		// A passthrough open and one through the daemon may not share an
		// inode (the kernel answers EIO), and a copy-up changes the file
		// under a node: every read and write goes through the daemon.
		DisabledCapabilities: fuse.CAP_PASSTHROUGH}
	server, err := fuse.NewServer(viewReplies{fs.NewNodeFS(root, opts)}, mnt, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, err // as fs.Mount: a mount that failed ends its loop
	}
	return server, nil
}

// viewReplies amends what a view's node tree answers the kernel. A
// read-only open gets FOPEN_NOFLUSH: such a handle wrote nothing, so its
// close has nothing to flush, and the branch's mount, which closes a view
// file at every release, does not wait for a FLUSH round trip each time.
// The attributes of a file of several names get no cache time
// (uncacheLinked).
type viewReplies struct {
	fuse.RawFileSystem
}

func (v viewReplies) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := v.RawFileSystem.Open(cancel, in, out)
	if st == fuse.OK && readOnlyOpen(in.Flags) {
		out.OpenFlags |= fuse.FOPEN_NOFLUSH
	}
	return st
}

func (v viewReplies) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	st := v.RawFileSystem.Lookup(cancel, h, name, out)
	uncacheLinked(&out.Attr, &out.AttrValid, &out.AttrValidNsec)
	return st
}

func (v viewReplies) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	st := v.RawFileSystem.GetAttr(cancel, in, out)
	uncacheLinked(&out.Attr, &out.AttrValid, &out.AttrValidNsec)
	return st
}

func (v viewReplies) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	st := v.RawFileSystem.SetAttr(cancel, in, out)
	uncacheLinked(&out.Attr, &out.AttrValid, &out.AttrValidNsec)
	return st
}

func (v viewReplies) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	st := v.RawFileSystem.Link(cancel, in, name, out)
	uncacheLinked(&out.Attr, &out.AttrValid, &out.AttrValidNsec)
	return st
}

// uncacheLinked gives no cache time to the attributes of a file that is
// not a directory and has several names. The view numbers each name's
// inode apart, so the kernel does not know that a link, unlink or rename
// through one name changes the link count and ctime the others show; with
// the view's long cache time they would show stale ones for as long.
func uncacheLinked(attr *fuse.Attr, sec *uint64, nsec *uint32) {
	if attr.Nlink > 1 && attr.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		*sec, *nsec = 0, 0
	}
}

// readOnlyOpen reports whether an open with flags neither writes nor
// truncates.
func readOnlyOpen(flags uint32) bool {
	return flags&syscall.O_ACCMODE == syscall.O_RDONLY && flags&syscall.O_TRUNC == 0
}
