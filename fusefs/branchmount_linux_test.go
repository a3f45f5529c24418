package fusefs

import (
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// openAnswer is a raw filesystem whose opens succeed with the flags it
// holds.
type openAnswer struct {
	fuse.RawFileSystem
	flags uint32
}

func (o openAnswer) Open(_ <-chan struct{}, _ *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	out.OpenFlags = o.flags
	return fuse.OK
}

// A branch view answers FOPEN_NOFLUSH to the opens that write nothing,
// keeping the flags its node gave, and to no other.
func TestViewOpensNoFlush(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags uint32
		want  bool
	}{
		{"read-only", syscall.O_RDONLY, true},
		{"read-only, no atime", syscall.O_RDONLY | syscall.O_NOATIME, true},
		{"write-only", syscall.O_WRONLY, false},
		{"read-write", syscall.O_RDWR, false},
		{"appending", syscall.O_WRONLY | syscall.O_APPEND, false},
		{"truncating read-only", syscall.O_RDONLY | syscall.O_TRUNC, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out fuse.OpenOut
			v := viewReplies{openAnswer{fuse.NewDefaultRawFileSystem(), fuse.FOPEN_DIRECT_IO}}
			if st := v.Open(nil, &fuse.OpenIn{Flags: tc.flags}, &out); st != fuse.OK {
				t.Fatalf("open: %v", st)
			}
			if got := out.OpenFlags&fuse.FOPEN_NOFLUSH != 0; got != tc.want || out.OpenFlags&fuse.FOPEN_DIRECT_IO == 0 {
				t.Fatalf("open flags %#x: NOFLUSH %v, want %v, and the node's DIRECT_IO kept", out.OpenFlags, got, tc.want)
			}
		})
	}
}

// A view's file of several names is answered with no attribute cache
// time; a file of one name and a directory keep theirs.
func TestViewUncachesLinked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  uint32
		nlink uint32
		want  uint64
	}{
		{"file of one name", syscall.S_IFREG | 0o644, 1, 30},
		{"file of two names", syscall.S_IFREG | 0o644, 2, 0},
		{"FIFO of two names", syscall.S_IFIFO | 0o644, 2, 0},
		{"directory", syscall.S_IFDIR | 0o755, 3, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := fuse.AttrOut{AttrValid: 30, AttrValidNsec: 5, Attr: fuse.Attr{Mode: tc.mode, Nlink: tc.nlink}}
			uncacheLinked(&out.Attr, &out.AttrValid, &out.AttrValidNsec)
			if out.AttrValid != tc.want || (tc.want == 0) != (out.AttrValidNsec == 0) {
				t.Fatalf("attribute validity %d s %d ns, want %d s", out.AttrValid, out.AttrValidNsec, tc.want)
			}
		})
	}
}
