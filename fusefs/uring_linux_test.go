package fusefs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keepURingParam returns what puts the fuse module's enable_uring back as
// it was: mounts with Options.IOUring switch it on for the machine.
func keepURingParam() func() {
	was, err := os.ReadFile(enableURingParam)
	if err != nil {
		return func() {}
	}
	return func() {
		if now, err := os.ReadFile(enableURingParam); err == nil && !bytes.Equal(now, was) {
			os.WriteFile(enableURingParam, []byte(strings.TrimSpace(string(was))), 0)
		}
	}
}

// uringUnoffered says why no mount of this process can be served over
// io_uring, changing nothing: "" where a root daemon may switch it on.
func uringUnoffered() string {
	if os.Geteuid() != 0 {
		return "io_uring needs a root daemon"
	}
	if _, err := os.Stat(enableURingParam); err != nil {
		return "the kernel has no FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING)"
	}
	return ""
}

// uringMountT mounts over io_uring, restoring enable_uring at cleanup, and
// skips (saying why) where the kernel serves the mount over /dev/fuse.
func uringMountT(t *testing.T, opts ...func(*Options)) *mounted {
	t.Helper()
	t.Cleanup(keepURingParam())
	m := mountT(t, append([]func(*Options){func(o *Options) { o.IOUring = true }}, opts...)...)
	if name, why := m.fs.Transport(); name != "io_uring" {
		t.Skipf("served over %s: %s", name, why)
	}
	return m
}

func TestURingServesTheMount(t *testing.T) {
	m := uringMountT(t)
	dir := filepath.Join(m.mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 100_000) // 1.6 MB: more than one entry's payload
	for _, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, name), want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %s: %d bytes, %v; want %d bytes", name, len(got), err, len(want))
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 3 {
		t.Fatalf("readdir: %v, %v", ents, err)
	}
	if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "z")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Fatalf("stat a after rename: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(m.backing, "d", "z")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("backing z: %d bytes, %v", len(got), err)
	}
	t.Logf("the rings served %d requests", m.fs.uring.served.Load())
	if n := m.fs.uring.served.Load(); n < 10 {
		t.Errorf("the rings served %d requests, want all of them", n)
	}
}

// Once io_uring is negotiated the kernel holds every request until the
// queues are registered: a daemon that cannot register after all must make
// the kernel give up, and the mount is served over /dev/fuse, saying why.
func TestURingFallsBackWhenRegistrationFails(t *testing.T) {
	t.Cleanup(keepURingParam())
	m := mountT(t, func(o *Options) { o.IOUring, o.uringRefused = true, true })
	name, why := m.fs.Transport()
	if m.fs.uring == nil {
		t.Skipf("served over %s: %s", name, why)
	}
	if name != "/dev/fuse" || !strings.Contains(why, "refused for the test") {
		t.Fatalf("transport %q (%q), want /dev/fuse and why", name, why)
	}
	if err := os.WriteFile(filepath.Join(m.mnt, "f"), []byte("over /dev/fuse\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(m.mnt, "f")); err != nil || string(got) != "over /dev/fuse\n" {
		t.Fatalf("read back: %q, %v", got, err)
	}
	if n := m.fs.uring.served.Load(); n != 0 {
		t.Errorf("the rings served %d requests, want none", n)
	}
}

func TestURingCPUCount(t *testing.T) {
	for list, want := range map[string]int{"0\n": 1, "0-1": 2, "0-3,8": 9, "0,2-5\n": 6} {
		if got, err := cpuCount(list); err != nil || got != want {
			t.Errorf("cpuCount(%q) = %d, %v; want %d", list, got, err, want)
		}
	}
	if _, err := cpuCount("x"); err == nil {
		t.Error("cpuCount(x) succeeded")
	}
}

// The transport reads go-fuse's /dev/fuse file from a field go-fuse does
// not export: a go-fuse that moves it must fail here, not in a mount.
func TestURingFindsGoFusesDevice(t *testing.T) {
	if _, err := reflectDevFile(nil); err != nil {
		t.Fatal(err)
	}
}

// A ring entry's request is handed to go-fuse as /dev/fuse would give it:
// the in header, the op header (its size from the header's length), then
// the payload; the reply's payload size is what go-fuse wrote past the out
// header, and a request it did not answer gets an error with its commit id.
func TestURingEntryRequestAndReply(t *testing.T) {
	e := &uringEnt{hdr: make([]byte, uringHeaderSize), payload: make([]byte, 8192)}
	name := []byte("file.txt\x00")
	ne.PutUint32(e.hdr[0:], uint32(inHeaderSize+16+len(name))) // CREATE: 16-byte op header, then the name
	ne.PutUint32(e.hdr[4:], 35)
	ne.PutUint64(e.hdr[uringEntOff+8:], 77)
	ne.PutUint32(e.hdr[uringEntOff+16:], uint32(len(name)))
	copy(e.payload, name)
	in, ok := e.request()
	if !ok || len(in) != 3 || len(in[0]) != inHeaderSize || len(in[1]) != 16 || !bytes.Equal(in[2], name) || e.commit != 77 {
		t.Fatalf("request: %d parts, ok %v, commit %d", len(in), ok, e.commit)
	}
	copy(e.payload, "overwritten by the reply")
	if !bytes.Equal(in[2], name) {
		t.Fatal("the request's payload shares the reply's buffer")
	}
	e.reply(outHeaderSize+144, 0)
	if got := ne.Uint32(e.hdr[uringEntOff+16:]); got != 144 {
		t.Errorf("reply payload size %d, want 144", got)
	}
	e.reply(0, 0)
	if errno, unique := int32(ne.Uint32(e.hdr[4:])), ne.Uint64(e.hdr[8:]); errno != -38 || unique != 77 {
		t.Errorf("unanswered request: error %d unique %d, want -ENOSYS (-38) and 77", errno, unique)
	}
	ne.PutUint32(e.hdr[0:], uint32(inHeaderSize+200)) // an op header larger than op_in
	ne.PutUint32(e.hdr[uringEntOff+16:], 0)
	if _, ok := e.request(); ok {
		t.Error("a request whose op header overflows op_in was accepted")
	}
}
