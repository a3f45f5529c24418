//go:build !linux

package fusefs

import (
	"log/slog"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// FUSE over io_uring is Linux's (uring_linux.go).
type uringTransport struct{ refused bool }

func newURing(int, *slog.Logger) (*uringTransport, string) {
	return nil, "io_uring is Linux's"
}

func (t *uringTransport) Why() string { return "io_uring is Linux's" }
func (t *uringTransport) wait() bool  { return true }
func (t *uringTransport) goServe()    {}

type uringInit struct {
	fuse.RawFileSystem
	t    *uringTransport
	opts *fuse.MountOptions
}
