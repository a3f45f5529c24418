package main

import "golang.org/x/sys/unix"

func detachMount(mnt string) error { return unix.Unmount(mnt, unix.MNT_FORCE) }
