//go:build !linux

package fusefs

// keepURingParam: there is no fuse module parameter to keep.
func keepURingParam() func() { return func() {} }

func uringUnoffered() string { return "io_uring is Linux's" }
