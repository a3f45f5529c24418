package main

import "errors"

// macOS has no bind mounts: a second mount of a mounted directory is
// refused.
const bindSupported = false

func bindMount(from, to string) error { return errors.New("bind mounts are Linux's") }

func allowsOthers(mnt string) bool { return false }
