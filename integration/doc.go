// Package integration holds tests that build and drive the real dshfs binary
// against real directories (and, once the mount exists, real mounts and real
// programs). It has no non-test code.
package integration
