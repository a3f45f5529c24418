package versionstore

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The index's records are stored exactly as the kept index has them: a
// record of every kind, with every field set, is these bytes. (The kept
// index has no salvage report; the others are there too, and TestKeptIndex
// reads them.)
func TestRecordEncodingUnchanged(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 30, 0, 123456789, time.UTC)
	ts := openTestStore(t, func(o *Options) { o.Now = func() time.Time { return at } })
	v1, v2 := SumString("one"), SumString("two")
	owner := &Owner{Uid: 1000, Gid: 100, Perm: 0o640}
	w := Writer{Kind: WriterMount, Actor: "a", Pid: 7, Uid: 1000, Comm: "vim"}
	want := map[string]string{}
	err := ts.db.Update(func(tx *bolt.Tx) error {
		r := record{Version: v1, FP: fingerprint{Ino: 1, Size: 2, MtimeNs: 3, CtimeNs: 4, Perm: 0o644, Uid: 5, Gid: 6, Owned: true}, Recorded: 7, HistFirst: 8, HistNext: 8, Perm: 0o600}
		must(t, appendHistory(tx, "k", &r, HistoryEntry{Version: v2, Size: 3, Time: at, Writer: w, Deleted: true, Owner: owner, Kept: true, NotKept: "x"}, 64))
		must(t, putRecord(tx, "k", r))
		must(t, journal(tx, JournalEntry{Path: "k", Prev: v1, PrevUnknown: true, PrevOwner: owner, Version: v2, Size: 3, Time: at, Writer: w, From: "f", To: "t"}))
		must(t, putSalvageReport(tx, SalvageReport{At: at, From: "/s/index.db.damaged-1", Copied: map[string]int{"files": 2}, Lost: 1, CompleteUntil: at, JournalSeq: 9, Unreadable: "u"}))
		return putUnsettled(tx, "k", unsettled{Version: v2, Before: []Version{v1}, NoFile: true, Size: 3, Perm: 0o644, Seq: 4})
	})
	must(t, err)
	_, err = ts.mark("cp", true)
	must(t, err)
	want["files k"] = `{"version":"` + v1.String() + `","fp":{"ino":1,"size":2,"mtime_ns":3,"ctime_ns":4,"perm":420,"uid":5,"gid":6,"owned":true},"recorded_ns":7,"hist_first":8,"hist_next":9,"perm":384}`
	want["history k"] = `{"version":"` + v2.String() + `","size":3,"time":"2026-05-01T12:30:00.123456789Z","writer":{"kind":"mount","actor":"a","pid":7,"uid":1000,"comm":"vim"},"deleted":true,"owner":{"uid":1000,"gid":100,"perm":416}}`
	want["journal"] = `{"seq":1,"path":"k","prev":"` + v1.String() + `","prev_unknown":true,"prev_owner":{"uid":1000,"gid":100,"perm":416},"version":"` + v2.String() + `","size":3,"time":"2026-05-01T12:30:00.123456789Z","writer":{"kind":"mount","actor":"a","pid":7,"uid":1000,"comm":"vim"},"from":"f","to":"t"}`
	want["salvage"] = `{"at":"2026-05-01T12:30:00.123456789Z","from":"/s/index.db.damaged-1","copied":{"files":2},"pages_lost":1,"history_complete_until":"2026-05-01T12:30:00.123456789Z","journal_seq":9,"unreadable":"u"}`
	want["unsettled k"] = `{"version":"` + v2.String() + `","before":["` + v1.String() + `"],"no_file":true,"size":3,"perm":420,"seq":4}`
	want["checkpoint"] = `{"name":"cp","seq":1,"time":"2026-05-01T12:30:00.123456789Z","files":1,"auto":true}`
	got := map[string]string{}
	must(t, ts.db.View(func(tx *bolt.Tx) error {
		got["files k"] = string(tx.Bucket(bucketFiles).Get([]byte("k")))
		got["history k"] = string(tx.Bucket(bucketHistory).Get(historyKey("k", 8)))
		got["journal"] = string(tx.Bucket(bucketJournal).Get(journalKey(1)))
		got["salvage"] = string(tx.Bucket(bucketMeta).Get(keySalvage))
		got["unsettled k"] = string(tx.Bucket(bucketUnsettled).Get([]byte("k")))
		got["checkpoint"] = string(tx.Bucket(bucketCheckpoints).Get([]byte("cp")))
		return nil
	}))
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s is stored as\n%s\nwant\n%s", k, got[k], w)
		}
	}
}
