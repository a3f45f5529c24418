package daemon

import (
	"reflect"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
)

// The dshfs mounts of the kernel's mount table, with its octal escapes
// undone: mount point, backing directory (the source) and the mounting uid.
func TestDshfsMounts(t *testing.T) {
	table := strings.Join([]string{
		`22 1 0:21 / /proc rw,nosuid - proc proc rw`,
		`95 30 0:52 / /mnt/my\040ws rw,nosuid,nodev shared:51 - fuse.dshfs /src/my\040ws\134x rw,user_id=1000,group_id=1000,default_permissions`,
		`96 30 0:53 / /mnt/b rw,nosuid,nodev - fuse.dshfs /src/b rw,group_id=0,default_permissions`,
		`97 30 0:54 / /mnt/other rw - fuse.sshfs host:/x rw,user_id=1000`,
	}, "\n")
	infos, err := mountinfo.GetMountsFromReader(strings.NewReader(table), mountinfo.FSTypeFilter(fsType))
	if err != nil {
		t.Fatal(err)
	}
	want := []systemMount{{MountPoint: "/mnt/my ws", Backing: `/src/my ws\x`, UID: 1000}, {MountPoint: "/mnt/b", Backing: "/src/b", UID: -1}}
	if got := dshfsMounts(infos); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
