//go:build !linux

package integration

import "testing"

func cURingSystem(*testing.B) (benchSystem, string) {
	return benchSystem{}, "FUSE over io_uring is Linux's"
}
