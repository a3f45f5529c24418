package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
)

// stdoutOf returns what fn prints to standard output.
func stdoutOf(t *testing.T, fn func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = saved }()
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	if err := fn(); err != nil {
		t.Error(err)
	}
	w.Close()
	return <-done
}

// A salvaged index is reported: what was lost, and from when.
func TestStatusReportsSalvage(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	e := statusEntry{Status: unixsocket.Status{MountPoint: "/mnt/ws", Backing: "/ws", IndexSalvage: &versionstore.SalvageReport{
		At: at, From: "/state/index.db.damaged-1", Lost: 3, CompleteUntil: at.Add(-time.Minute),
	}}}
	out := stdoutOf(t, func() error { return printStatus([]statusEntry{e}) })
	want := "/mnt/ws: the index was damaged and salvaged at 2026-01-02 03:04:05 (3 pages lost, kept in /state/index.db.damaged-1); history may miss changes after 2026-01-02 03:03:05"
	if !strings.Contains(out, want) {
		t.Fatalf("status:\n%s\nwant a line %q", out, want)
	}
}
