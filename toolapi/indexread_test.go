package toolapi

import (
	"testing"

	"github.com/dshfs/dshfs/versionstore"
	bolt "go.etcd.io/bbolt"
)

// damageEntry leaves the index entry of rel undecodable, as a bad sector
// inside a sound page would.
func (h *harness) damageEntry(rel string) {
	h.t.Helper()
	err := h.store.DB().Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("files")).Put([]byte(rel), []byte("{not json"))
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// A file whose index entry cannot be read is named in the error, which
// says the index could not be read: neither a read that takes it for a
// file never seen, nor a restore that replaces it and then blames a full
// disk.
func TestUnreadableEntryIsNamed(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "one\n")
	mustOK(t, h.read(agent, "a.txt"))
	h.put("a.txt", "two\n")
	mustOK(t, h.read(agent, "a.txt"))
	h.put("a.txt", "three\n") // a new fingerprint: the entry is consulted
	h.damageEntry("a.txt")
	const cause = `(decode index entry "a.txt": invalid character 'n' looking for beginning of object key string)`
	const hint = "; check the disk where dshfs keeps its state, then retry"

	mustFail(t, h.read(agent, "a.txt"), versionstore.CodeIOError,
		`cannot read "`+h.disp("a.txt")+`": the index could not be read `+cause+hint)

	_, _, err := h.svc.Restore(t.Context(), "", "a.txt", versionstore.SumString("one\n").String(), "me")
	want := `cannot restore "` + h.disp("a.txt") + `": the index could not be read ` + cause + hint
	if err == nil || err.Error() != want {
		t.Errorf("restore: %v\nwant %s", err, want)
	}
	if got := h.get("a.txt"); got != "three\n" {
		t.Errorf("a.txt = %q after a restore that could not read its entry, want it untouched", got)
	}

	_, err = h.store.Checkpoint(t.Context(), "cp", nil)
	want = `checkpoint failed: the index could not be read ` + cause + hint
	if got := Describe("checkpoint", err); got == nil || got.Error() != want {
		t.Errorf("checkpoint: %v\nwant %s", got, want)
	}
}

// A history that cannot be read is named as such: log, show and diff say
// which file's versions could not be listed.
func TestUnreadableHistoryIsNamed(t *testing.T) {
	h := newHarness(t)
	h.put("a.txt", "one\n")
	mustOK(t, h.read(agent, "a.txt"))
	err := h.store.DB().Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("history")).Cursor()
		k, _ := c.First()
		return tx.Bucket([]byte("history")).Put(k, []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `cannot list the versions of "` + h.disp("a.txt") + `": the index could not be read (decode history of "a.txt": ` +
		`invalid character 'n' looking for beginning of object key string); check the disk where dshfs keeps its state, then retry`
	if _, err := h.svc.History("", "a.txt"); err == nil || err.Error() != want {
		t.Errorf("history: %v\nwant %s", err, want)
	}
	if _, _, err := h.svc.Show("", "a.txt", versionstore.SumString("one\n").String()); err == nil || err.Error() != want {
		t.Errorf("show: %v\nwant %s", err, want)
	}
}
