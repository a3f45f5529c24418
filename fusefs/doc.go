// Package fusefs will own the go-fuse node tree over the backing directory:
// every mutating FUSE operation takes the file's versionstore lock, marks the
// entry dirty, and commits its version when the last writer flushes, with the
// caller's pid, uid and command. syscall.Errno appears in this package only.
//
// It is not built yet; the engine it sits on (versionstore, policy, toolapi)
// is. See the design contract's layout and the project's open issues.
package fusefs
