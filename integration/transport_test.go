package integration

import (
	"bytes"
	"os"
	"testing"

	"github.com/dshfs/dshfs/fusefs"
)

const enableURing = "/sys/module/fuse/parameters/enable_uring"

// testURing serves the in-process mounts of the package's tests
// (mountWorkspace) over io_uring: DSHFS_TEST_TRANSPORT=uring, as make test
// runs the stress test a second time. Where the kernel does not offer it
// those tests are skipped, saying why.
var testURing = os.Getenv("DSHFS_TEST_TRANSPORT") == "uring"

// keepURingParam puts the fuse module's enable_uring back as it was at
// cleanup: mount --io-uring switches it on for the machine.
func keepURingParam(t testing.TB) {
	was, err := os.ReadFile(enableURing)
	if err != nil {
		return
	}
	t.Cleanup(func() {
		if now, err := os.ReadFile(enableURing); err == nil && !bytes.Equal(now, was) {
			os.WriteFile(enableURing, bytes.TrimSpace(was), 0)
		}
	})
}

// transportOptions sets o to serve a test's mount over io_uring when the
// run asks for it, skipping the test, saying why, where the kernel cannot.
func transportOptions(t *testing.T, o *fusefs.Options) {
	if !testURing {
		return
	}
	switch _, err := os.Stat(enableURing); {
	case os.Geteuid() != 0:
		t.Skip("DSHFS_TEST_TRANSPORT=uring: io_uring needs a root daemon")
	case err != nil:
		t.Skip("DSHFS_TEST_TRANSPORT=uring: the kernel has no FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING)")
	}
	keepURingParam(t)
	o.IOUring = true
}

// checkTransport fails a test whose mount was asked for io_uring and is
// served over /dev/fuse: it would pass without testing the transport.
func checkTransport(t *testing.T, fs *fusefs.FS, o fusefs.Options) {
	if name, why := fs.Transport(); o.IOUring && name != "io_uring" {
		t.Fatalf("DSHFS_TEST_TRANSPORT=uring, but served over %s: %s", name, why)
	}
}
