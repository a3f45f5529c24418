package toolapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// These tests port the reference implementation's integration.spec.ts: the
// tools over a real store and policy, with files checked byte for byte on disk.

func TestStaleWrite(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "original")
	mustOK(t, h.read(agent, "a.txt"))
	h.put("a.txt", "changed-externally")
	mustFail(t, h.write(agent, "a.txt", "replaced"), versionstore.CodeStaleVersion,
		`cannot write "`+h.disp("a.txt")+`": file changed since it was read — re-read the file, then retry`)
	if got := h.get("a.txt"); got != "changed-externally" {
		t.Fatalf("stale write changed the file to %q", got)
	}
	// Re-reading unblocks.
	mustOK(t, h.read(agent, "a.txt"))
	mustText(t, h.write(agent, "a.txt", "replaced"), fileBlock(h.disp("a.txt"), "Updated file"))
	if got := h.get("a.txt"); got != "replaced" {
		t.Fatalf("content = %q", got)
	}
}

func TestStaleEdit(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "hello world")
	mustOK(t, h.call(ToolRead, agent, map[string]any{"file_path": "a.txt", "offset": 1, "limit": 1}))
	h.put("a.txt", "goodbye") // removes "world": stale is checked before matching
	mustFail(t, h.edit(agent, "a.txt", "world", "there"), versionstore.CodeStaleVersion,
		`cannot edit "`+h.disp("a.txt")+`": file changed since it was read — re-read the file, then retry`)
	if got := h.get("a.txt"); got != "goodbye" {
		t.Fatalf("stale edit changed the file to %q", got)
	}
	mustOK(t, h.read(agent, "a.txt"))
	mustFail(t, h.edit(agent, "a.txt", "world", "there"), versionstore.CodeEditNotFound,
		`old_string was not found in "`+h.disp("a.txt")+`"`)
	mustOK(t, h.edit(agent, "a.txt", "good", "GOOD"))
	if got := h.get("a.txt"); got != "GOODbye" {
		t.Fatalf("content = %q", got)
	}
}

// The version is a hash of the bytes, so rewriting identical bytes (a
// formatter, touch, git checkout) never makes an observation stale.
func TestIdenticalRewriteIsNotStale(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "hello world")
	mustOK(t, h.read(agent, "a.txt"))
	if err := os.Remove(h.backing("a.txt")); err != nil {
		t.Fatal(err)
	}
	h.put("a.txt", "hello world") // a new inode, new times, same bytes
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(h.backing("a.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	mustOK(t, h.edit(agent, "a.txt", "world", "there"))
	if got := h.get("a.txt"); got != "hello there" {
		t.Fatalf("content = %q", got)
	}
}

func TestPagination(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "one\ntwo\nthree\nfour")
	mustText(t, h.call(ToolRead, agent, map[string]any{"file_path": "a.txt", "offset": 2, "limit": 2}), fileBlock(h.disp("a.txt"),
		"2: two\n3: three\n\n(Showing lines 2-3 of 4. Use offset=4 to continue.)"))
	mustText(t, h.call(ToolRead, agent, map[string]any{"file_path": "a.txt", "offset": 4, "limit": 2}), fileBlock(h.disp("a.txt"),
		"4: four\n\n(End of file - total 4 lines)"))
}

func TestWindowedReadAuthorizesEditOutsideWindow(t *testing.T) {
	h := newHarness(t)
	var lines []string
	for i := 1; i <= 20; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	h.put("a.txt", strings.Join(lines, "\n"))
	r := h.call(ToolRead, agent, map[string]any{"file_path": "a.txt", "offset": 1, "limit": 1})
	mustText(t, r, fileBlock(h.disp("a.txt"), "1: line 1\n\n(Showing lines 1-1 of 20. Use offset=2 to continue.)"))
	mustText(t, h.edit(agent, "a.txt", "line 12", "LINE 12"), "The file "+h.disp("a.txt")+" has been updated successfully.")
	lines[11] = "LINE 12"
	if got, want := h.get("a.txt"), strings.Join(lines, "\n"); got != want {
		t.Fatalf("content:\n got %q\nwant %q", got, want)
	}
	// A windowed read authorizes a full overwrite too.
	mustOK(t, h.call(ToolRead, agent, map[string]any{"file_path": "a.txt", "offset": 20}))
	mustText(t, h.write(agent, "a.txt", "short\n"), fileBlock(h.disp("a.txt"), "Updated file"))
}

func TestAmbiguousAndReplaceAll(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "a a a")
	mustOK(t, h.read(agent, "a.txt"))
	mustFail(t, h.edit(agent, "a.txt", "a", "b"), versionstore.CodeAmbiguousEdit,
		`old_string matched 3 times in "`+h.disp("a.txt")+`"; provide a more specific old_string or set replace_all to true`)
	if got := h.get("a.txt"); got != "a a a" {
		t.Fatalf("ambiguous edit changed the file to %q", got)
	}
	// A failed edit does not spend the observation.
	mustText(t, h.call(ToolEdit, agent, map[string]any{"file_path": "a.txt", "old_string": "a", "new_string": "b", "replace_all": true}),
		"The file "+h.disp("a.txt")+" has been updated. All occurrences were successfully replaced.")
	if got := h.get("a.txt"); got != "b b b" {
		t.Fatalf("content = %q", got)
	}
}

func TestWriteThenEditWithoutRead(t *testing.T) {
	h := newHarness(t)
	mustText(t, h.write(agent, "a.txt", "one two"), fileBlock(h.disp("a.txt"), "Created file"))
	mustText(t, h.edit(agent, "a.txt", "two", "three"), "The file "+h.disp("a.txt")+" has been updated successfully.")
	// An edit refreshes the basis as well: edit → edit → write, no read.
	mustOK(t, h.edit(agent, "a.txt", "one", "zero"))
	mustText(t, h.write(agent, "a.txt", "fresh"), fileBlock(h.disp("a.txt"), "Updated file"))
	if got := h.get("a.txt"); got != "fresh" {
		t.Fatalf("content = %q", got)
	}
}

// The store's own reads are not the tool's: they record no observation.
func TestDirectStoreReadRecordsNothing(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "hello world")
	tg, err := h.store.Resolve("a.txt", h.disp("a.txt"), "read")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Read(context.Background(), tg, func([]byte, bool) error { return nil }); err != nil {
		t.Fatal(err)
	}
	mustFail(t, h.edit(agent, "a.txt", "world", "there"), versionstore.CodeNotObserved,
		`edit requires reading "`+h.disp("a.txt")+`" first`+readNow)
}

func TestDeletedTargetRecovery(t *testing.T) {
	h := newHarness(t)
	d := h.disp("deleted.txt")
	h.put("deleted.txt", "x\n")
	mustOK(t, h.read(agent, "deleted.txt"))
	if err := os.Remove(h.backing("deleted.txt")); err != nil {
		t.Fatal(err)
	}
	mustFail(t, h.write(agent, "deleted.txt", "y\n"), versionstore.CodeStaleVersion,
		`cannot write "`+d+`": file no longer exists — re-read the file, then retry`)
	mustNotExist(t, h.backing("deleted.txt")) // a guarded replace never recreates
	mustFail(t, h.edit(agent, "deleted.txt", "x", "y"), versionstore.CodeStaleVersion,
		`cannot edit "`+d+`": file changed since it was read — re-read the file, then retry`)
	mustFail(t, h.read(agent, "deleted.txt"), versionstore.CodeNotFound, `cannot read "`+d+`": not found`)
	mustFail(t, h.edit(agent, "deleted.txt", "x", "y"), versionstore.CodeNotFound, `cannot edit "`+d+`": not found`)
	mustText(t, h.write(agent, "deleted.txt", "y\n"), fileBlock(d, "Created file"))
	if got := h.get("deleted.txt"); got != "y\n" {
		t.Fatalf("content = %q", got)
	}
}

// An absence observation does not license replacing a file that appeared
// since: the write is a create, and meets the newcomer.
func TestAbsenceThenExternalCreate(t *testing.T) {
	h := newHarness(t)
	mustFail(t, h.read(agent, "late.txt"), versionstore.CodeNotFound, `cannot read "`+h.disp("late.txt")+`": not found`)
	h.put("late.txt", "someone else's")
	mustFail(t, h.write(agent, "late.txt", "mine"), versionstore.CodeNotObserved,
		`cannot overwrite existing "`+h.disp("late.txt")+`" without reading it first`+readNow)
	if got := h.get("late.txt"); got != "someone else's" {
		t.Fatalf("content = %q", got)
	}
}

func TestBareDeployment(t *testing.T) {
	h := newHarness(t, bareProvider())
	h.put("a.txt", "original")
	mustText(t, h.write(agent, "a.txt", "clobbered"), fileBlock(h.disp("a.txt"), "Updated file"))
	if got := h.get("a.txt"); got != "clobbered" {
		t.Fatalf("content = %q", got)
	}
	mustText(t, h.write(agent, "new.txt", "fresh"), fileBlock(h.disp("new.txt"), "Created file"))

	h.put("b.txt", "hello world")
	mustText(t, h.edit(agent, "b.txt", "world", "there"), "The file "+h.disp("b.txt")+" has been updated successfully.")
	if got := h.get("b.txt"); got != "hello there" {
		t.Fatalf("content = %q", got)
	}
	// No actor at all works the same without a policy.
	mustOK(t, h.edit("", "b.txt", "there", "again"))

	mustFail(t, h.edit(agent, "missing.txt", "a", "b"), versionstore.CodeStaleVersion,
		`cannot edit "`+h.disp("missing.txt")+`": file changed since it was read — re-read the file, then retry`)
	mustNotExist(t, h.backing("missing.txt"))
	mustFail(t, h.edit(agent, "b.txt", "absent", "x"), versionstore.CodeEditNotFound,
		`old_string was not found in "`+h.disp("b.txt")+`"`)
	// Reads still work and record nothing anywhere.
	mustOK(t, h.read(agent, "b.txt"))
}

func TestNoOwnerActor(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "hello world")
	mustOK(t, h.read("", "a.txt"))
	// No owner: the read recorded nothing, so edit needs a read and write only creates.
	mustFail(t, h.edit("", "a.txt", "world", "there"), versionstore.CodeNotObserved,
		`edit requires reading "`+h.disp("a.txt")+`" first`+readNow)
	mustFail(t, h.write("", "a.txt", "x"), versionstore.CodeNotObserved,
		`cannot overwrite existing "`+h.disp("a.txt")+`" without reading it first`+readNow)
	mustText(t, h.write("", "b.txt", "x"), fileBlock(h.disp("b.txt"), "Created file"))
	mustFail(t, h.write("", "b.txt", "y"), versionstore.CodeNotObserved,
		`cannot overwrite existing "`+h.disp("b.txt")+`" without reading it first`+readNow)
	if h.get("a.txt") != "hello world" || h.get("b.txt") != "x" {
		t.Fatal("no-owner calls changed files they may not")
	}
	actors, err := h.pol.Actors()
	if err != nil || len(actors) != 0 {
		t.Fatalf("Actors() = %q, %v; want none", actors, err)
	}
}

func TestTwoActorsSeparateObservations(t *testing.T) {
	h := newHarness(t)
	d := h.disp("a.txt")
	h.put("a.txt", "alpha beta")
	mustOK(t, h.read("one", "a.txt"))
	mustFail(t, h.edit("two", "a.txt", "beta", "B"), versionstore.CodeNotObserved, `edit requires reading "`+d+`" first`+readNow)
	mustFail(t, h.write("two", "a.txt", "x"), versionstore.CodeNotObserved,
		`cannot overwrite existing "`+d+`" without reading it first`+readNow)
	mustOK(t, h.edit("one", "a.txt", "alpha", "A"))

	// two reads the new version; one's own edit refreshed its basis. Then
	// two edits, and one is stale.
	mustOK(t, h.read("two", "a.txt"))
	mustOK(t, h.edit("two", "a.txt", "beta", "B"))
	mustFail(t, h.edit("one", "a.txt", "A", "AA"), versionstore.CodeStaleVersion,
		`cannot edit "`+d+`": file changed since it was read`+reRead)
	if got := h.get("a.txt"); got != "A B" {
		t.Fatalf("content = %q", got)
	}
}

func TestOlderObservationLosesAtCAS(t *testing.T) {
	h := newHarness(t)
	d := h.disp("a.txt")
	h.put("a.txt", "v1\n")
	mustOK(t, h.read("old", "a.txt"))
	mustOK(t, h.read("new", "a.txt"))
	mustOK(t, h.write("new", "a.txt", "v2\n"))
	mustFail(t, h.write("old", "a.txt", "v1 edited\n"), versionstore.CodeStaleVersion,
		`cannot write "`+d+`": file changed since it was read`+reRead)
	mustFail(t, h.edit("old", "a.txt", "v", "V"), versionstore.CodeStaleVersion,
		`cannot edit "`+d+`": file changed since it was read`+reRead)
	if got := h.get("a.txt"); got != "v2\n" {
		t.Fatalf("content = %q", got)
	}
	// The newer observation still holds.
	mustOK(t, h.edit("new", "a.txt", "v2", "v3"))
}

// Two guarded mutations at one version race; exactly one wins and the
// other is stale, and the file holds exactly the winner's change.
func TestConcurrentGuardedMutationsOneWins(t *testing.T) {
	const rounds = 25
	type mutation struct {
		actor string
		tool  string
		args  map[string]any
		after string // the file if this one wins
	}
	tests := []struct {
		name string
		a, b func(path string) mutation
		// chained: one actor's calls may also run one after the other, the
		// second on the basis the first refreshed; then both win, and
		// neither change may be lost.
		chained string
	}{
		{
			name: "two actors edit",
			a: func(p string) mutation {
				return mutation{"one", ToolEdit, map[string]any{"file_path": p, "old_string": "left", "new_string": "LEFT"}, "LEFT right\n"}
			},
			b: func(p string) mutation {
				return mutation{"two", ToolEdit, map[string]any{"file_path": p, "old_string": "right", "new_string": "RIGHT"}, "left RIGHT\n"}
			},
		},
		{
			name: "one actor edits twice",
			a: func(p string) mutation {
				return mutation{"one", ToolEdit, map[string]any{"file_path": p, "old_string": "left", "new_string": "LEFT"}, "LEFT right\n"}
			},
			b: func(p string) mutation {
				return mutation{"one", ToolEdit, map[string]any{"file_path": p, "old_string": "right", "new_string": "RIGHT"}, "left RIGHT\n"}
			},
			chained: "LEFT RIGHT\n",
		},
		{
			name: "two actors write",
			a: func(p string) mutation {
				return mutation{"one", ToolWrite, map[string]any{"file_path": p, "content": "from one\n"}, "from one\n"}
			},
			b: func(p string) mutation {
				return mutation{"two", ToolWrite, map[string]any{"file_path": p, "content": "from two\n"}, "from two\n"}
			},
		},
		{
			name: "write against edit",
			a: func(p string) mutation {
				return mutation{"one", ToolWrite, map[string]any{"file_path": p, "content": "from one\n"}, "from one\n"}
			},
			b: func(p string) mutation {
				return mutation{"two", ToolEdit, map[string]any{"file_path": p, "old_string": "right", "new_string": "RIGHT"}, "left RIGHT\n"}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			wins := map[string]int{}
			for round := 0; round < rounds; round++ {
				rel := fmt.Sprintf("race-%d.txt", round)
				h.put(rel, "left right\n")
				ms := []mutation{tc.a(rel), tc.b(rel)}
				for _, m := range ms {
					mustOK(t, h.read(m.actor, rel))
				}
				results := make([]Result, len(ms))
				errs := make([]error, len(ms))
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i, m := range ms {
					req := Request{Actor: m.actor, Arguments: rawArgs(t, m.args)}
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						results[i], errs[i] = h.svc.Call(context.Background(), m.tool, req)
					}()
				}
				close(start)
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}

				winner := -1
				for i, r := range results {
					if r.IsError {
						continue
					}
					if winner >= 0 && tc.chained != "" {
						if got := h.get(rel); got != tc.chained {
							t.Fatalf("round %d: both won in turn, but the content is %q, want %q", round, got, tc.chained)
						}
						winner = 2
						break
					}
					if winner >= 0 {
						t.Fatalf("round %d: both won: %q and %q; final %q", round, results[0].Text, results[1].Text, h.get(rel))
					}
					winner = i
				}
				if winner < 0 {
					t.Fatalf("round %d: neither won: %q / %q", round, results[0].Text, results[1].Text)
				}
				if winner == 2 {
					wins["both, in turn"]++
					continue
				}
				loser := 1 - winner
				verb := map[string]string{ToolEdit: "edit", ToolWrite: "write"}[ms[loser].tool]
				mustFail(t, results[loser], versionstore.CodeStaleVersion,
					`cannot `+verb+` "`+h.disp(rel)+`": file changed since it was read`+reRead)
				if got := h.get(rel); got != ms[winner].after {
					t.Fatalf("round %d: content %q, want the winner's %q alone", round, got, ms[winner].after)
				}
				wins[fmt.Sprint(winner)]++
			}
			t.Logf("wins by position: %v", wins)
		})
	}
}

func TestReadVersionIsHashOfExactBytes(t *testing.T) {
	tests := []struct {
		name    string
		content string
	}{
		{"plain", "hello\nworld\n"},
		{"empty", ""},
		{"no final newline", "a\nb"},
		{"BOM and CRLF", "\xef\xbb\xbfline one\r\nline two\r\n"},
		{"lone CR", "a\rb\r\n"},
		{"long", strings.Repeat("0123456789abcdef\n", 10000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.put("f.txt", tc.content)
			want := versionstore.Sum([]byte(tc.content))
			r := h.read(agent, "f.txt")
			if got := readVersion(t, r); got != want {
				t.Fatalf("read version %s, want blake3 of the bytes %s", got, want)
			}
			if !strings.HasPrefix(want.String(), "b3:") || len(want.String()) != 3+64 {
				t.Fatalf("version form %q", want.String())
			}
			// The bytes were not changed by reading.
			if got := h.get("f.txt"); got != tc.content {
				t.Fatalf("content changed: %q", got)
			}
		})
	}
}

func TestMutationVersionsAreHashesOfDisk(t *testing.T) {
	h := newHarness(t)
	w := h.write(agent, "f.txt", "one\r\ntwo\r\n")
	mustOK(t, w)
	if got, want := w.Value.(WriteValue).Version, versionstore.SumString(h.get("f.txt")); got != want {
		t.Fatalf("write version %s, disk hashes to %s", got, want)
	}
	e := h.edit(agent, "f.txt", "two", "2")
	mustOK(t, e)
	if h.get("f.txt") != "one\r\n2\r\n" {
		t.Fatalf("content = %q", h.get("f.txt"))
	}
	if got, want := e.Value.(EditValue).Version, versionstore.SumString(h.get("f.txt")); got != want {
		t.Fatalf("edit version %s, disk hashes to %s", got, want)
	}
	if got := readVersion(t, h.read(agent, "f.txt")); got != e.Value.(EditValue).Version {
		t.Fatalf("read after edit saw %s, edit reported %s", got, e.Value.(EditValue).Version)
	}
}

func TestObservationsSurviveReopen(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "hello world")
	h.put("b.txt", "stale soon")
	mustOK(t, h.read(agent, "a.txt"))
	mustOK(t, h.read(agent, "b.txt"))
	mustFail(t, h.read(agent, "gone.txt"), versionstore.CodeNotFound, `cannot read "`+h.disp("gone.txt")+`": not found`)

	h.reopen()
	h.put("b.txt", "changed while the daemon was down")

	mustText(t, h.edit(agent, "a.txt", "world", "there"), "The file "+h.disp("a.txt")+" has been updated successfully.")
	if got := h.get("a.txt"); got != "hello there" {
		t.Fatalf("content = %q", got)
	}
	mustFail(t, h.edit(agent, "b.txt", "stale", "fresh"), versionstore.CodeStaleVersion,
		`cannot edit "`+h.disp("b.txt")+`": file changed since it was read`+reRead)
	mustFail(t, h.edit(agent, "gone.txt", "a", "b"), versionstore.CodeNotFound, `cannot edit "`+h.disp("gone.txt")+`": not found`)
	mustFail(t, h.edit("other", "a.txt", "hello", "bye"), versionstore.CodeNotObserved,
		`edit requires reading "`+h.disp("a.txt")+`" first`+readNow)
}

func TestValueShapes(t *testing.T) {
	h := newHarness(t)
	d := h.disp("f.txt")
	ver := func(s string) string { return versionstore.SumString(s).String() }

	h.put("f.txt", "a\r\nOLD\r\nb\r\n")
	mustJSONValue(t, h.read(agent, "f.txt"),
		`{"path":"`+d+`","offset":1,"lines":[{"number":1,"text":"a"},{"number":2,"text":"OLD"},{"number":3,"text":"b"}],"totalLines":3,"version":"`+ver("a\r\nOLD\r\nb\r\n")+`"}`)
	mustJSONValue(t, h.call(ToolRead, agent, map[string]any{"file_path": "f.txt", "offset": 2, "limit": 1}),
		`{"path":"`+d+`","offset":2,"lines":[{"number":2,"text":"OLD"}],"totalLines":3,"version":"`+ver("a\r\nOLD\r\nb\r\n")+`"}`)

	// Edit: versions, never the text; CRLF kept on disk.
	mustJSONValue(t, h.edit(agent, "f.txt", "OLD", "NEW"),
		`{"path":"`+d+`","operation":"update","replacements":1,"version":"`+ver("a\r\nNEW\r\nb\r\n")+`","previous_version":"`+ver("a\r\nOLD\r\nb\r\n")+`"}`)
	if got := h.get("f.txt"); got != "a\r\nNEW\r\nb\r\n" {
		t.Fatalf("disk = %q, want CRLF kept", got)
	}

	// Write update: the version replaced, not the text; the bytes on disk
	// are verbatim.
	mustJSONValue(t, h.write(agent, "f.txt", "x\r\ny\n"),
		`{"path":"`+d+`","operation":"update","version":"`+ver("x\r\ny\n")+`","previous_version":"`+ver("a\r\nNEW\r\nb\r\n")+`"}`)
	if got := h.get("f.txt"); got != "x\r\ny\n" {
		t.Fatalf("disk = %q", got)
	}

	// Write create: no previous version.
	mustJSONValue(t, h.write(agent, "g.txt", "new\n"),
		`{"path":"`+h.disp("g.txt")+`","operation":"create","version":"`+ver("new\n")+`"}`)

	// Replace-all counts its replacements.
	mustJSONValue(t, h.call(ToolEdit, agent, map[string]any{"file_path": "g.txt", "old_string": "e", "new_string": "EE", "replace_all": true}),
		`{"path":"`+h.disp("g.txt")+`","operation":"update","replacements":1,"version":"`+ver("nEEw\n")+`","previous_version":"`+ver("new\n")+`"}`)

	// The whole result on the wire, for a failure and a success.
	b, _ := json.Marshal(h.read(agent, "nope.txt"))
	want := `{"text":"Error: cannot read \"` + h.disp("nope.txt") + `\": not found","is_error":true,"error":{"code":"FS_NOT_FOUND","message":"cannot read \"` + h.disp("nope.txt") + `\": not found"}}`
	if string(b) != want {
		t.Fatalf("failure on the wire:\n got %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(h.call(ToolRead, agent, `{"file_path":" "}`))
	want = `{"text":"Error: file_path must be a non-empty string","is_error":true,"error":{"message":"file_path must be a non-empty string"}}`
	if string(b) != want {
		t.Fatalf("argument failure on the wire:\n got %s\nwant %s", b, want)
	}
}

// dshfs keeps a UTF-8 BOM on edit (the reference implementation drops it).
func TestEditKeepsBOM(t *testing.T) {
	h := newHarness(t)
	h.put("bom.txt", "\xef\xbb\xbfkey = 1\r\nother = 2\r\n")
	r := h.read(agent, "bom.txt")
	mustText(t, r, fileBlock(h.disp("bom.txt"), "1: key = 1\n2: other = 2\n\n(End of file - total 2 lines)"))
	mustOK(t, h.edit(agent, "bom.txt", "key = 1", "key = 3"))
	if got := h.get("bom.txt"); got != "\xef\xbb\xbfkey = 3\r\nother = 2\r\n" {
		t.Fatalf("content = %q, want BOM and CRLF kept", got)
	}
}

// An actor name the index cannot store (a NUL byte) is refused before the
// call does anything, rather than failing to record the observation after
// the write committed.
func TestActorWithNULRefusedUpFront(t *testing.T) {
	h := newHarness(t)
	r := h.write("bad\x00actor", "a.txt", "written")
	mustFail(t, r, "", "actor must not contain a NUL byte")
	if _, err := os.Stat(filepath.Join(h.ws, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused call wrote the file (stat err %v)", err)
	}
}

// A cancelled call changes nothing: FS_ABORTED "<verb> aborted".
func TestCancelledCallsAbort(t *testing.T) {
	h := newHarness(t)
	h.put("f.txt", "one")
	mustOK(t, h.read(agent, "f.txt"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct{ tool, args, msg string }{
		{ToolRead, `{"file_path":"f.txt"}`, "read aborted"},
		{ToolWrite, `{"file_path":"f.txt","content":"two"}`, "write aborted"},
		{ToolEdit, `{"file_path":"f.txt","old_string":"one","new_string":"two"}`, "edit aborted"},
	} {
		r, err := h.svc.Call(ctx, tc.tool, Request{Actor: agent, Arguments: json.RawMessage(tc.args)})
		if err != nil {
			t.Fatal(err)
		}
		mustFail(t, r, versionstore.CodeAborted, tc.msg)
	}
	if h.get("f.txt") != "one" {
		t.Fatal("a cancelled call changed the file")
	}
}
