package toolapi

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// A file past the size dshfs hashes (versioned by its stat) is read as any
// file is, and the write and edit tools refuse it in the reference's words
// for a size over a limit, with nothing changed.
func TestWriteAndEditRefuseAnUnhashedFile(t *testing.T) {
	h := newHarness(t, bareProvider())
	h.put("big.txt", strings.Repeat("hello\n", 2000)) // text past the binary check's 8 KiB
	size := int64(versionstore.DefaultCaptureMaxBytes + 1)
	if err := os.Truncate(h.backing("big.txt"), size); err != nil {
		t.Fatal(err)
	}
	if r := h.read(agent, h.disp("big.txt")); r.IsError {
		t.Fatalf("read: %s", r.Text)
	}
	limit := strconv.Itoa(versionstore.DefaultCaptureMaxBytes)
	for verb, r := range map[string]Result{
		"write": h.write(agent, h.disp("big.txt"), "bye\n"),
		"edit":  h.edit(agent, h.disp("big.txt"), "hello", "bye"),
	} {
		want := `cannot ` + verb + ` "` + h.disp("big.txt") + `": ` + strconv.FormatInt(size, 10) + ` bytes exceeds the ` + limit + `-byte limit for write and edit`
		if !r.IsError || r.Error == nil || r.Error.Code != string(versionstore.CodeTooLarge) || r.Error.Message != want {
			t.Errorf("%s: %+v, want FS_TOO_LARGE %q", verb, r.Error, want)
		}
	}
	if fi, err := os.Stat(h.backing("big.txt")); err != nil || fi.Size() != size {
		t.Errorf("the file changed: %v, %v", fi, err)
	}
}
