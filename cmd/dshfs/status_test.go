package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/dshfs/dshfs/versionstore/remote"
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

// A salvaged index is reported: what was lost and copied, where the
// damaged file is, and from when history may be missing.
func TestStatusReportsSalvage(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	for _, c := range []struct {
		rep  versionstore.SalvageReport
		want string
	}{
		{versionstore.SalvageReport{At: at, From: "/state/index.db.damaged-1", Lost: 3, CompleteUntil: at.Add(-time.Minute),
			Copied: map[string]int{"history": 70, "journal": 80, "meta": 1}},
			"/mnt/ws: the index was damaged and salvaged at 2026-01-02 03:04:05: 3 pages of it could not be read; 80 journal, 70 history and 1 meta entries were copied; the damaged index is kept in /state/index.db.damaged-1; history may miss changes after 2026-01-02 03:03:05"},
		{versionstore.SalvageReport{At: at, From: "/state/index.db.damaged-1", Lost: 1, Copied: map[string]int{}},
			"/mnt/ws: the index was damaged and salvaged at 2026-01-02 03:04:05: 1 page of it could not be read; nothing could be copied: the history, checkpoints and observations it held are lost; the damaged index is kept in /state/index.db.damaged-1; no change in its journal could be read: history may miss any change before the salvage"},
		{versionstore.SalvageReport{At: at, From: "/state/index.db.damaged-1", CompleteUntil: at, Copied: map[string]int{"files": 2}},
			"/mnt/ws: the index was damaged and salvaged at 2026-01-02 03:04:05: every page of it could be read; 2 files entries were copied; the damaged index is kept in /state/index.db.damaged-1; history may miss changes after 2026-01-02 03:04:05"},
		{versionstore.SalvageReport{At: at, From: "/state/index.db.damaged-1", Copied: map[string]int{}, Unreadable: "index check: no valid meta page"},
			"/mnt/ws: the index was damaged and nothing could be read from it (index check: no valid meta page) at 2026-01-02 03:04:05: the history, checkpoints and observations it held are lost; the damaged index is kept in /state/index.db.damaged-1"},
	} {
		e := statusEntry{Status: unixsocket.Status{MountPoint: "/mnt/ws", Backing: "/ws", IndexSalvage: &c.rep}}
		out := stdoutOf(t, func() error { return printStatus([]statusEntry{e}) })
		if !strings.Contains(out, c.want+"\n") {
			t.Errorf("status:\n%s\nwant a line %q", out, c.want)
		}
	}
}

// A replica's status says how far it is, and names the objects in the
// bucket that are damaged and can no longer be sent again.
func TestRemoteTextNamesDamaged(t *testing.T) {
	st := &remote.Status{Remote: "s3://b/ws", ShippedSeq: 7, LocalSeq: 9, Lag: 1500 * time.Millisecond,
		Damaged: []string{"b3:1f2e3d4c5b6a in packs/9c"}}
	got := remoteText("/mnt", st)
	for _, want := range []string{"history replicated to s3://b/ws, journal shipped through entry 7 of 9, 1.5s behind",
		"1 objects in the bucket are damaged and no longer kept here to send again (b3:1f2e3d4c5b6a in packs/9c)"} {
		if !strings.Contains(got, want) {
			t.Fatalf("status %q lacks %q", got, want)
		}
	}
}
