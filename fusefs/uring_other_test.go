//go:build !linux

package fusefs

// keepURingParam: there is no fuse module parameter to keep.
func keepURingParam() func() { return func() {} }
