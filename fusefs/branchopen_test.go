package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A layer's file is read where the layer holds it: a symlink at the end or
// on the way, a FIFO, a directory and an escape are refused, not followed.
func TestReadRegularBeneath(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o600))
	must(t, os.MkdirAll(filepath.Join(root, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "d", "f"), []byte("f\n"), 0o640))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")))
	must(t, os.Symlink(outside, filepath.Join(root, "dirlink")))
	must(t, unix.Mkfifo(filepath.Join(root, "fifo"), 0o600))

	data, fi, err := readRegular(root, "d/f")
	if err != nil || string(data) != "f\n" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("d/f: %q %v %v", data, fi, err)
	}
	for _, rel := range []string{"link", "dirlink/secret", "fifo", "d", "../" + filepath.Base(outside) + "/secret", "d/f/x"} {
		data, _, err := readRegular(root, rel)
		if err == nil || !notReadable(err) && rel != "../"+filepath.Base(outside)+"/secret" {
			t.Errorf("%s: read %q, err %v; want a refusal", rel, data, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
