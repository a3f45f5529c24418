package versionstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/klauspost/compress/zstd"

	bolt "go.etcd.io/bbolt"
)

// Salvage: a damaged index is not discarded. Its pages are read with the
// same plain reads that check it (indexcheck.go), never through bbolt, and
// every entry of every bucket on a page that reads soundly is copied into
// the new index; a page that does not is skipped with what hangs below it
// and counted as lost. The damaged file stays beside the new one for
// inspection. Versions of files whose entries were lost are recomputed from
// the files on first access, as for any file the index does not know.

// SalvageReport says what a salvage copied and lost. The index keeps it as
// a diskSalvage (records.go).
type SalvageReport struct {
	At     time.Time      `json:"at"`         // when the index was salvaged
	From   string         `json:"from"`       // the damaged file, kept
	Copied map[string]int `json:"copied"`     // entries per top-level bucket
	Lost   int            `json:"pages_lost"` // pages that could not be read
	// CompleteUntil is the time of the latest journal entry copied, and
	// JournalSeq its number: changes after it may be missing from history
	// (zero: no journal entry could be read).
	CompleteUntil time.Time `json:"history_complete_until"`
	JournalSeq    uint64    `json:"journal_seq"`
	// Unreadable, if set, says why nothing could be read from the damaged
	// index (no valid meta page): the new one starts empty.
	Unreadable string `json:"unreadable,omitempty"`
}

// salvage copies what can be read of the damaged index at path into db, and
// records and logs what it copied and lost; keptAs is where the damaged file
// will be kept. An error that is not indexDamage (the new index's commit, a
// read of the old one) is the disk's.
func salvage(path, keptAs string, db *bolt.DB, log *slog.Logger) (rep SalvageReport, err error) {
	rep = SalvageReport{At: time.Now().UTC(), From: keptAs, Copied: map[string]int{}}
	defer func() {
		if r := recover(); r != nil {
			err = indexDamage{fmt.Errorf("salvage index: %v", r)}
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		return rep, fmt.Errorf("salvage index: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rep, fmt.Errorf("salvage index: %w", err)
	}
	r, err := openRawIndex(f, fi.Size())
	if err != nil {
		return rep, damage(fmt.Errorf("salvage index: %w", err))
	}
	rootSound := r.salvageRoot()
	err = db.Update(func(tx *bolt.Tx) error {
		c := &salvager{r: r, rep: &rep}
		if !rootSound {
			rep.Lost++
		}
		return c.copyInto(tx)
	})
	if err != nil {
		return rep, fmt.Errorf("salvage index: %w", err)
	}
	log.Warn("index salvaged", "from", keptAs, "copied", rep.Copied, "pages_lost", rep.Lost,
		"history_complete_until", rep.CompleteUntil, "journal_seq", rep.JournalSeq)
	return rep, nil
}

// copyInto copies every top-level bucket into tx and records the report.
func (c *salvager) copyInto(tx *bolt.Tx) error {
	c.entries(c.r.meta.root, nil, 0, func(k, v []byte, isBucket bool) {
		if !isBucket || len(k) == 0 {
			return
		}
		b, err := tx.CreateBucketIfNotExists(k)
		if err != nil {
			return
		}
		c.copyBucket(b, string(k), v, 1)
	})
	// The copied records are of the damaged index's schema.
	if err := upgradeSchema(tx); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMeta).Delete(keyClean); err != nil {
		return err
	}
	newest := newestJournalEntry(tx)
	c.rep.CompleteUntil, c.rep.JournalSeq = newest.Time, newest.Seq
	return putSalvageReport(tx, *c.rep)
}

// putSalvageReport records rep in the new index, for the status to show.
func putSalvageReport(tx *bolt.Tx, rep SalvageReport) error {
	v, err := encodeSalvage(rep)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(keySalvage, v)
}

// salvageIndex salvages the damaged index at path into path.new, and only
// once that is written puts the new index in its place, keeping the damaged
// one beside it as path.damaged-<time>. Until then the original stays at
// path: a salvage that fails (a full disk) loses nothing, and the next start
// tries again.
func salvageIndex(path string, bopts *bolt.Options, log *slog.Logger) (*bolt.DB, error) {
	tmp := path + ".new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove %s: %w", tmp, err)
	}
	db, err := openChecked(tmp, bopts)
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	aside := fmt.Sprintf("%s.damaged-%d", path, time.Now().Unix())
	if _, err := salvage(path, aside, db, log); err != nil {
		if !isDamage(err) {
			db.Close()
			os.Remove(tmp)
			return nil, err
		}
		log.Error("index not salvaged: its history, checkpoints and observations are lost", "kept_as", aside, "err", err)
		rep := SalvageReport{At: time.Now().UTC(), From: aside, Copied: map[string]int{}, Unreadable: err.Error()}
		if err := db.Update(func(tx *bolt.Tx) error { return putSalvageReport(tx, rep) }); err != nil {
			db.Close()
			os.Remove(tmp)
			return nil, fmt.Errorf("salvage index: %w", err)
		}
	}
	if err := replaceIndex(path, tmp, aside); err != nil {
		db.Close()
		os.Remove(tmp)
		return nil, err
	}
	return db, nil
}

// replaceIndex keeps the index at path as aside and puts tmp in its place.
// A hard link keeps it, so that path names an index at every moment (a
// start that found none would create an empty one); where the filesystem
// has no hard links, it is renamed.
func replaceIndex(path, tmp, aside string) error {
	if err := os.Link(path, aside); err != nil {
		if err := os.Rename(path, aside); err != nil {
			return fmt.Errorf("keep damaged index: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace index: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("sync state directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync state directory: %w", err)
	}
	return nil
}

// salvageRoot chooses the commit to salvage from: the newest whose root
// page holds the store's buckets (a leaf of bucket entries: there are few),
// and reports whether there was one. A power cut on a disk that lies about
// syncs can leave the newest meta page naming a root page that was torn or
// that a later commit reused for something else, while the commit before it
// is whole; the salvage then copies that one, and the report's journal
// position says how far it reaches. With neither, the newest is walked for
// what buckets it may still lead to.
func (r *rawIndex) salvageRoot() bool {
	if r.rootHoldsBuckets() {
		return true
	}
	newest := r.meta
	if r.hasOlder && r.use(r.older) == nil && r.rootHoldsBuckets() {
		return true
	}
	r.use(newest)
	return false
}

// rootHoldsBuckets reports whether the root page is a leaf of buckets.
func (r *rawIndex) rootHoldsBuckets() bool {
	buf, err := r.page(r.meta.root)
	if err != nil {
		return false
	}
	flags, elems, err := elements(buf)
	if err != nil || flags != leafPageFlag || len(elems) == 0 {
		return false
	}
	for _, e := range elems {
		if !e.bucket {
			return false
		}
	}
	return true
}

// salvager copies entries from the raw index, counting what it loses.
type salvager struct {
	r   *rawIndex
	rep *SalvageReport
}

// copyBucket copies the bucket whose header is hdr into b.
func (c *salvager) copyBucket(b *bolt.Bucket, top string, hdr []byte, depth int) {
	if len(hdr) < bucketHeaderLen {
		c.rep.Lost++
		return
	}
	if seq := binary.LittleEndian.Uint64(hdr[8:]); seq > b.Sequence() {
		b.SetSequence(seq)
	}
	root, inline := binary.LittleEndian.Uint64(hdr), []byte(nil)
	if root == 0 {
		inline = hdr[bucketHeaderLen:]
	}
	c.entries(root, inline, depth, func(k, v []byte, isBucket bool) {
		switch {
		case len(k) == 0 || len(k) > bolt.MaxKeySize:
			c.rep.Lost++
		case isBucket:
			if sub, err := b.CreateBucketIfNotExists(k); err == nil {
				c.copyBucket(sub, top, v, depth+1)
			}
		case top == string(bucketMeta) && bytes.Equal(k, keyClean):
		case jsonBuckets[top] && !validValue(v):
			c.rep.Lost++
		default:
			if b.Put(bytes.Clone(k), bytes.Clone(v)) == nil {
				c.rep.Copied[top]++
			}
		}
	})
}

// entries calls fn for every entry below page root (or of the inline page),
// skipping pages that do not read soundly or were reached before.
func (c *salvager) entries(root uint64, inline []byte, depth int, fn func(k, v []byte, isBucket bool)) {
	if depth > maxIndexDepth {
		c.rep.Lost++
		return
	}
	buf := inline
	if buf == nil {
		var err error
		if buf, err = c.r.page(root); err != nil {
			c.rep.Lost++
			return
		}
		if c.r.reach(root, uint64(len(buf))/uint64(c.r.meta.pageSize)) != nil {
			c.rep.Lost++
			return
		}
	}
	flags, elems, err := elements(buf)
	if err != nil {
		c.rep.Lost++
		return
	}
	for _, e := range elems {
		if flags == branchPageFlag {
			c.entries(e.child, nil, depth+1, fn)
		} else {
			fn(e.key, e.value, e.bucket)
		}
	}
}

// newestJournalEntry is the journal's last entry (zero if none).
func newestJournalEntry(tx *bolt.Tx) JournalEntry {
	var e JournalEntry
	if b := tx.Bucket(bucketJournal); b != nil {
		if _, v := b.Cursor().Last(); v != nil {
			e, _ = decodeJournal(v)
		}
	}
	return e
}

// Salvaged returns the report of the last salvage of this index, if it was
// ever salvaged: the status shows it.
// A report that does not decode is an error: taken for none, the status
// would say the index was never salvaged.
func (s *Store) Salvaged() (rep SalvageReport, found bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(keySalvage)
		if v == nil {
			return nil
		}
		var err error
		if rep, err = decodeSalvage(v); err != nil {
			return fmt.Errorf("decode salvage report: %w", err)
		}
		found = true
		return nil
	})
	return rep, found, err
}

// reattachObjects gives the object files under objects/ that the salvaged
// index no longer names their entries back: each is decoded and verified
// against its name first.
func (s *Store) reattachObjects() {
	var found []packed
	err := filepath.WalkDir(s.objects.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		v, err := ParseVersion(versionPrefix + filepath.Base(filepath.Dir(p)) + d.Name())
		if err != nil {
			return nil
		}
		if kept, err := s.kept(v); err != nil || kept {
			return err
		}
		if p, ok := s.objects.reattach(v, p); ok {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		s.log.Error("re-attach kept objects after a salvage", "err", err)
		return
	}
	if len(found) == 0 {
		return
	}
	err = s.commits.update(func(tx *bolt.Tx) error {
		for _, p := range found {
			if _, err := putObject(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.log.Error("re-attach kept objects after a salvage", "err", err)
		return
	}
	s.log.Warn("kept objects re-attached after a salvage", "objects", len(found))
}

// reattach reads the object file at path and returns its entry, if it
// holds the bytes of v.
func (o *objectStore) reattach(v Version, path string) (packed, bool) {
	z, err := os.ReadFile(path)
	if err != nil {
		return packed{}, false
	}
	var h zstd.Header
	if h.Decode(z) != nil || !h.HasFCS || h.FrameContentSize > uint64(max(o.maxKeep, DefaultCaptureMaxBytes)) {
		return packed{}, false
	}
	data, err := o.dec.DecodeAll(z, make([]byte, 0, h.FrameContentSize))
	if err != nil || Sum(data) != v {
		return packed{}, false
	}
	value := make([]byte, objHeader)
	value[0] = objFile
	stored := time.Now()
	if fi, err := os.Stat(path); err == nil {
		stored = fi.ModTime()
	}
	binary.BigEndian.PutUint64(value[1:], uint64(stored.Unix()))
	binary.BigEndian.PutUint64(value[9:], uint64(len(data)))
	binary.BigEndian.PutUint64(value[17:], uint64(len(z)))
	return packed{version: v, value: value}, true
}
