package main

import (
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

const bindSupported = true

// bindMount shows the mount at from at to as well.
func bindMount(from, to string) error { return unix.Mount(from, to, "", unix.MS_BIND, "") }

// allowsOthers reports whether the mount at mnt was made with allow_other.
func allowsOthers(mnt string) bool {
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(mnt))
	return err == nil && len(ms) == 1 && slices.Contains(strings.Split(ms[0].VFSOptions, ","), "allow_other")
}
