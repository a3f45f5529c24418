package toolapi

import (
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// commits is the index's transaction id: it advances by one per committed
// read-write transaction, and each costs the index two syncs (its pages,
// then its meta page).
func (h *harness) commits() int {
	h.t.Helper()
	var id int
	if err := h.store.DB().View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// A tool edit or write records its version and what its actor saw of it in
// one durable index commit, not one each. (Every publish synced: a small
// one's record is otherwise dropped by a commit of the settler's after the
// acknowledgement, at a moment the count cannot pin.)
func TestToolMutationCommitsOnce(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.syncPublishes = true })
	text := strings.Repeat("line of text\n", 315) + "MARK-A\n" // ~4 KiB
	if err := os.WriteFile(h.backing("f.txt"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := h.call(ToolRead, agent, map[string]any{"file_path": h.disp("f.txt")}); r.IsError {
		t.Fatal(r.Text)
	}
	const n = 8
	before := h.commits()
	marks := [2]string{"MARK-A", "MARK-B"}
	for i := range n {
		r := h.call(ToolEdit, agent, map[string]any{"file_path": h.disp("f.txt"), "old_string": marks[i%2], "new_string": marks[(i+1)%2]})
		if r.IsError {
			t.Fatal(r.Text)
		}
	}
	if got := h.commits() - before; got != n {
		t.Errorf("%d edits made %d index commits, want %d", n, got, n)
	}
	before = h.commits()
	for i := range n {
		if r := h.call(ToolWrite, agent, map[string]any{"file_path": h.disp("f.txt"), "content": text + marks[i%2]}); r.IsError {
			t.Fatal(r.Text)
		}
	}
	if got := h.commits() - before; got != n {
		t.Errorf("%d writes made %d index commits, want %d", n, got, n)
	}
	// What the commit recorded is what the actor saw: it may edit again.
	if r := h.call(ToolEdit, agent, map[string]any{"file_path": h.disp("f.txt"), "old_string": "MARK-A\nMARK-B", "new_string": "MARK-C"}); r.IsError {
		t.Fatal(r.Text)
	}
}
