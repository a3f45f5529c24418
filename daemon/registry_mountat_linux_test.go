package daemon

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/dshfs/dshfs/fusefs"
	"github.com/dshfs/dshfs/internal/testfuse"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// askedRoot is the root of a mount that counts the times its record is
// asked for, and has none.
type askedRoot struct {
	fs.Inode
	asked atomic.Int32
}

var _ = (fs.NodeGetxattrer)((*askedRoot)(nil))

func (r *askedRoot) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if attr == fusefs.DaemonInfoXattr {
		r.asked.Add(1)
	}
	return 0, syscall.ENODATA
}

// dshfs unmount looked its mount up by reading the record of every mount of
// the user's (as root: of every root mount on the machine), so one whose
// daemon hangs cost each unmount a whole recordTimeout. MountAt reads the
// record of the mount at its path alone.
func TestMountAtAsksOnlyThatMount(t *testing.T) {
	testfuse.Require(t)
	var roots []*askedRoot
	var mnts []string
	for range 2 {
		mnt, root := t.TempDir(), &askedRoot{}
		opts := &fs.Options{MountOptions: fuse.MountOptions{Name: "dshfs", FsName: filepath.Join(t.TempDir(), "src"), DirectMount: true}}
		srv, err := fs.Mount(mnt, root, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Unmount() })
		roots, mnts = append(roots, root), append(mnts, mnt)
	}
	if _, ok := MountAt(mnts[0]); !ok {
		t.Fatalf("MountAt(%s): not found", mnts[0])
	}
	if n := roots[0].asked.Load(); n != 1 {
		t.Errorf("the mount looked up was asked for its record %d times, want 1", n)
	}
	if n := roots[1].asked.Load(); n != 0 {
		t.Errorf("another mount was asked for its record %d times, want 0", n)
	}
}
