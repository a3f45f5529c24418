package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	unixsocket "github.com/dshfs/dshfs/unix-socket"
	"github.com/dshfs/dshfs/versionstore"
)

// What the agent or its processes name — files, process names, actors —
// and checkpoint names recorded before such names were refused reach the
// terminal quoted (quote.Name): no control byte is printed, so no line of
// a table can be forged or erased.
func TestHumanOutputQuotesNames(t *testing.T) {
	const esc = "\x1b[2K"
	mountWriter := versionstore.Writer{Kind: versionstore.WriterMount, Pid: 7, Comm: "ev" + esc + "il", Actor: "harness\n1"}
	var buf bytes.Buffer
	printChanges(&buf, []unixsocket.Change{
		{JournalEntry: versionstore.JournalEntry{Path: "x\nforged", Writer: mountWriter, Time: time.Now()}, Op: "write"},
		{JournalEntry: versionstore.JournalEntry{Path: "new" + esc, From: "old\tname", Time: time.Now()}, Op: "rename"},
	})
	printHistory(&buf, []unixsocket.HistoryEntry{{Writer: mountWriter, Time: time.Now(), Kept: true}})
	printCheckpoints(&buf, []unixsocket.Checkpoint{{Name: "cp" + esc, Time: time.Now()}})
	printRewind(&buf, unixsocket.RewindResult{Checkpoint: "cp" + esc, Before: "undo\r", Conflicts: 1, Actions: []unixsocket.RewindAction{
		{Path: "a" + esc, Op: "restore"},
		{Path: "b\n", Op: "remove", Error: "cannot restore \"b\n\": being written"},
	}})
	printRewind(&buf, unixsocket.RewindResult{Checkpoint: "cp", Actor: "ag" + esc, Before: "cp-2", Conflicts: 1, Actions: []unixsocket.RewindAction{
		{Path: "c", Op: "restore", Error: "changed after actor", ChangedBy: &mountWriter},
	}})
	out := buf.String()
	for _, want := range []string{
		`"x\nforged"`, `mount, "ev\033[2Kil" (pid 7, uid 0) for "harness\n1"`, `"new\033[2K" (from "old\tname")`,
		`"cp\033[2K"`, `restored  "a\033[2K"`, `conflict  "b\n": cannot restore "b\n": being written`,
		`rewound to "cp\033[2K": 1 file(s) changed, 1 conflict(s); undo with: dshfs rewind "undo\r"`,
		`before "ag\033[2K" none, "ag\033[2K"'s none, now none; changed by mount, "ev\033[2Kil" (pid 7, uid 0) for "harness\n1"`,
		`rewound "ag\033[2K"'s changes since cp: 0 file(s) changed, 1 conflict(s)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s", want)
		}
	}
	for i, line := range strings.Split(out, "\n") {
		if strings.ContainsFunc(line, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Errorf("line %d holds a control character: %q", i, line)
		}
	}
}
