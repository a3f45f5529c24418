package daemon

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// devFuseHint says how to open the FUSE device at dev, which the user uid
// may not open, to that user. The device is often root:root 0600 (minimal
// VMs, containers), where "join the group that owns it" would send people
// to the root group: then the advice is a group of its own, "fuse"; where
// a group may already use it, the advice is to join that group. Either way
// a new group membership counts only from the next login, and udev sets
// the node up afresh at boot from its rules.
func devFuseHint(dev string, uid int) string {
	name := userName(uint32(uid))
	who := fmt.Sprintf("uid %d (%s)", uid, name)
	if name == strconv.Itoa(uid) {
		who = "uid " + name
	}
	fi, err := os.Stat(dev)
	if err != nil {
		return fmt.Sprintf("%s is not open to %s", dev, who)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%s is not open to %s", dev, who)
	}
	owner, group := userName(st.Uid), groupName(st.Gid)
	join := fmt.Sprintf("give it a group of its own and add the user to it (groupadd -f fuse; chgrp fuse %s; chmod 0660 %s; usermod -aG fuse %s; then log in again)", dev, dev, name)
	if st.Gid != 0 && fi.Mode().Perm()&0o060 == 0o060 {
		join = fmt.Sprintf("add the user to its group (usermod -aG %s %s; then log in again)", group, name)
	}
	return fmt.Sprintf("%s (%s:%s, mode %04o) is not open to %s: as root, %s, or open it to every user (chmod 0666 %s); udev may set it back at the next boot",
		dev, owner, group, fi.Mode().Perm(), who, join, dev)
}

// userName is the name of the user id, else the id itself.
func userName(id uint32) string {
	s := strconv.FormatUint(uint64(id), 10)
	if u, err := user.LookupId(s); err == nil {
		return u.Username
	}
	return s
}

// groupName is the name of the group id, else the id itself.
func groupName(id uint32) string {
	s := strconv.FormatUint(uint64(id), 10)
	if g, err := user.LookupGroupId(s); err == nil {
		return g.Name
	}
	return s
}
