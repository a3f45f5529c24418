package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
)

// The progress bar draws on a terminal only, and clears its line when done.
func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := &progressBar{w: &buf, label: "rewind", on: true}
	p.update(unixsocket.Progress{Done: 5, Total: 10})
	p.done()
	if got := buf.String(); !strings.Contains(got, "\rrewind [###############---------------] 5/10") || !strings.HasSuffix(got, "\r\033[K") {
		t.Fatalf("bar drew %q", got)
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	quiet := newProgressBar(f, "gc")
	quiet.update(unixsocket.Progress{Done: 1, Total: 2})
	quiet.done()
	if fi, _ := f.Stat(); fi.Size() != 0 || quiet.on {
		t.Fatalf("a bar drew %d bytes into a file", fi.Size())
	}
}
