//go:build !linux

package integration

import (
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// devFuseUnchanged: only Linux scripts run as another user.
func devFuseUnchanged(t *testing.T) {}

// fusedevCmd: the mount namespace it makes is Linux's.
func fusedevCmd(ts *testscript.TestScript, neg bool, args []string) {
	ts.Fatalf("fusedev needs Linux's mount namespaces")
}
