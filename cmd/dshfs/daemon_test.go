package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The daemon reports readiness once. It used to report again when the mount
// failed later (an unmount while files were still open), on the descriptor
// it had closed after "ok" — by then reused for a file the mount had open,
// whose bytes were replaced by the error message.
func TestReadyPipeReportsOnce(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd, err := unix.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	ready := openReadyPipe(fd)
	if !ready.report(nil) {
		t.Fatal("nobody was told")
	}
	if got, _ := io.ReadAll(r); string(got) != "ok\n" {
		t.Fatalf("parent read %q, want ok", got)
	}
	// The number is free again, and now names a file the mount has open.
	path := filepath.Join(t.TempDir(), "important.txt")
	if err := os.WriteFile(path, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Dup2(int(f.Fd()), fd); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if ready.report(errors.New("unmount: detached, but still in use")) {
		t.Fatal("a second report claimed a listener")
	}
	if got, _ := os.ReadFile(path); string(got) != "precious\n" {
		t.Fatalf("the file that reused the descriptor now holds %q", got)
	}
}
