package versionstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// IntentKind is the guard a write runs under.
type IntentKind int

// The three write intents of the reference implementation.
const (
	// IntentNone writes unconditionally (create or overwrite).
	IntentNone IntentKind = iota
	// IntentCreateIfAbsent creates the file and never replaces one.
	IntentCreateIfAbsent
	// IntentReplaceIfVersion replaces the file only at Intent.Version.
	IntentReplaceIfVersion
)

// Intent guards a write.
type Intent struct {
	Kind    IntentKind
	Version Version // for IntentReplaceIfVersion
}

// WriteResult is the outcome of WriteText. It carries versions, never the
// file's text: a caller that wants the change asks for a diff of the two.
type WriteResult struct {
	Created  bool
	Version  Version
	Previous Version // the version replaced; zero for a created file
}

// UpdateResult is the outcome of Update.
type UpdateResult struct {
	Version  Version
	Previous Version // the version updated
}

// DefaultDiffBasisMaxBytes is the reference implementation's limit for the
// prior text kept for a write's diff.
const DefaultDiffBasisMaxBytes = 10 << 20

// WriteText writes content to t atomically under t's lock, if intent allows.
// Errors follow the reference implementation: FS_NOT_REGULAR_FILE for a
// non-file target; FS_STALE_VERSION when a guarded replace meets a missing or
// different file; FS_NOT_OBSERVED when a guarded create meets an existing file.
func (s *Store) WriteText(ctx context.Context, t Target, content string, intent Intent, w Writer, also ...AlsoCommit) (WriteResult, error) {
	var res WriteResult
	if ctx.Err() != nil {
		return res, fail(ReasonAborted, "write", "")
	}
	defer s.published(t.Key, &res.Version) // after the unlock below
	s.mount.awaitWriters(ctx, t.Key)
	unlock := s.locks.Lock(t.Key)
	defer unlock()
	s.flushPending()
	keep := int64(0)
	switch {
	case intent.Kind == IntentCreateIfAbsent:
		keep = statOnly // an existing file fails the intent whatever its bytes
	case len(content) < s.diffBasisMax:
		keep = int64(s.diffBasisMax)
	}
	if keep != statOnly && s.objects.capturing() {
		keep = max(keep, s.objects.maxKeep+1) // the bytes replaced are kept
	}
	cur, err := s.snapshotLocked(t, "write", keep)
	if err != nil {
		return res, err
	}
	if err := s.writeAllowed(t, cur, intent); err != nil {
		s.recordSeen(t.Key, cur)
		return res, err
	}
	perm := s.fileMode
	if cur.fi != nil {
		perm = cur.fi.Mode().Perm()
	}
	if err := s.keepPrior(t, "write", cur); err != nil {
		return res, err
	}
	data := []byte(content)
	at := s.now() // before the publish: the racy rule compares against it
	tp := s.toolPublish(t, "write", cur, at, data, perm, w, also)
	tp.how.create = intent.Kind == IntentCreateIfAbsent
	fi, err := s.publish(ctx, t, "write", data, perm, nil, &cur, tp.how)
	if err != nil {
		if !tp.recorded {
			s.recordSeen(t.Key, cur)
		}
		return res, err
	}
	res.Created, res.Previous = cur.fi == nil, cur.version
	res.Version, err = tp.finish(fi)
	return res, err
}

// writeAllowed applies the reference implementation's order of write checks,
// and refuses to publish over writes in progress through the mount: they would
// land in the replaced inode and be lost.
func (s *Store) writeAllowed(t Target, cur snapshot, intent Intent) error {
	if cur.fi != nil && !cur.fi.Mode().IsRegular() {
		return fail(ReasonNotRegular, "write", t.Display)
	}
	if cur.fi != nil && intent.Kind != IntentCreateIfAbsent && !s.objects.hashes(cur.fi.Size()) {
		return s.unhashedFailure("write", t, cur.fi.Size())
	}
	if cur.fi != nil && intent.Kind != IntentCreateIfAbsent && s.mount.writing(t.Key) {
		return s.mount.writingFailure("write", t.Display, t.Key)
	}
	switch intent.Kind {
	case IntentReplaceIfVersion:
		if cur.fi == nil {
			return fail(ReasonGone, "write", t.Display)
		}
		if cur.version != intent.Version {
			return fail(ReasonChanged, "write", t.Display)
		}
	case IntentCreateIfAbsent:
		if cur.fi != nil {
			return fail(ReasonExists, "write", t.Display)
		}
	}
	return nil
}

// Update replaces the bytes of the existing regular file t with what fn makes
// of its current bytes, under t's lock, in bbolt's shape: fn runs with the lock
// held and the file unchanged underneath it, and an error from fn is returned
// as it is, with nothing written. With expect set the file must still be at
// that version (compare-and-swap); the check comes before fn, so fn never sees
// stale bytes. A missing target is FS_STALE_VERSION (ReasonChanged) even
// without expect, as the reference implementation's edit has it. fn must not
// keep current past its return. Errors have an empty Op: the caller names the
// operation.
func (s *Store) Update(ctx context.Context, t Target, expect *Version, fn func(current []byte) ([]byte, error), w Writer, also ...AlsoCommit) (UpdateResult, error) {
	var res UpdateResult
	if ctx.Err() != nil {
		return res, fail(ReasonAborted, "", "")
	}
	defer s.published(t.Key, &res.Version) // after the unlock below
	s.mount.awaitWriters(ctx, t.Key)
	unlock := s.locks.Lock(t.Key)
	defer unlock()
	s.flushPending()
	cur, err := s.snapshotLocked(t, "", -1)
	if err != nil {
		return res, err
	}
	if res, err = s.updateLocked(ctx, t, cur, expect, fn, w, also); err != nil {
		s.recordSeen(t.Key, cur)
	}
	return res, err
}

func (s *Store) updateLocked(ctx context.Context, t Target, cur snapshot, expect *Version, fn func([]byte) ([]byte, error), w Writer, also []AlsoCommit) (UpdateResult, error) {
	var res UpdateResult
	switch {
	case cur.fi == nil:
		return res, fail(ReasonChanged, "", t.Display)
	case !cur.fi.Mode().IsRegular():
		return res, fail(ReasonNotRegular, "", t.Display)
	case s.mount.writing(t.Key):
		return res, s.mount.writingFailure("", t.Display, t.Key)
	case expect != nil && *expect != cur.version:
		return res, fail(ReasonChanged, "", t.Display)
	}
	data, err := fn(cur.data)
	if err != nil {
		return res, err
	}
	if err := s.keepPrior(t, "", cur); err != nil {
		return res, err
	}
	at := s.now()
	tp := s.toolPublish(t, "", cur, at, data, cur.fi.Mode().Perm(), w, also)
	fi, err := s.publish(ctx, t, "", data, cur.fi.Mode().Perm(), nil, &cur, tp.how)
	if err != nil {
		return res, err
	}
	res.Previous = cur.version
	res.Version, err = tp.finish(fi)
	return res, err
}

// keepPrior keeps the bytes cur found, an outside change the store has not
// kept yet, in a commit of their own before a tool's write replaces them:
// riding the write's commit, they would be gone from disk and from the
// index alike if that commit failed (a full disk under the state
// directory). A failure refuses the write with the file untouched. Bytes
// the store does not keep anyway (over the capture limit, capture off) are
// replaced as before.
func (s *Store) keepPrior(t Target, verb string, cur snapshot) error {
	if cur.fi == nil || cur.data == nil || !s.objects.keeps(int64(len(cur.data))) {
		return nil
	}
	return s.keepReplaced(t, verb, cur)
}

// keepReplaced makes sure the bytes cur found, about to be replaced, are
// kept: they are committed unless they are already, and ReasonWouldLose
// says they could not be (too large to keep, or not read).
func (s *Store) keepReplaced(t Target, verb string, cur snapshot) error {
	kept, err := s.kept(cur.version)
	if err != nil || kept {
		return wrapIndexRead(verb, t.Display, err)
	}
	if cur.data != nil && s.objects.keeps(int64(len(cur.data))) {
		if err := s.commit([]string{t.Key}, []change{{version: cur.version, data: cur.data, keepOnly: true}}); err != nil {
			return indexError(verb, t.Display, err)
		}
	}
	if kept, err = s.kept(cur.version); err != nil || kept {
		return wrapIndexRead(verb, t.Display, err)
	}
	return &Error{Reason: ReasonWouldLose, Op: verb, Path: t.Display, Err: ErrWouldLose}
}

// published tells the OnPublish hook that key has new bytes, if it has. It
// runs after the file's lock is released: the hook invalidates kernel caches,
// which must never happen under a filesystem lock.
func (s *Store) published(key string, v *Version) {
	if s.onPublish != nil && !v.IsZero() {
		s.onPublish(key)
	}
}

// toolPub is a tool's publish of data over prior at t, written by w, and
// its commit. A small one is not synced (settle.go): its commit, with the
// bytes and the unsettled record, runs inside publish right before the
// rename (how.record), so a cut after the rename always finds the record.
// A large one is synced, then committed by finish.
type toolPub struct {
	s        *Store
	t        Target
	verb     string
	prior    snapshot
	at       time.Time
	data     []byte
	perm     fs.FileMode
	w        Writer
	also     []AlsoCommit
	u        *unsettled // nil: synced
	how      pubHow
	v        Version     // once recorded
	tmpFP    fingerprint // the temp file's, as recorded: the rename changes the ctime
	recorded bool        // how.record committed (and undo, if it ran, recorded what is there)
}

// toolPublish prepares a tool's write or edit of data over cur at t.
// Callers hold t's lock.
func (s *Store) toolPublish(t Target, verb string, cur snapshot, at time.Time, data []byte, perm fs.FileMode, w Writer, also []AlsoCommit) *toolPub {
	tp := &toolPub{s: s, t: t, verb: verb, prior: cur, at: at, data: data, perm: perm, w: w, also: also}
	if !s.deferrable(len(data)) {
		s.settleUnder(t.Key, true) // its commit does not replace an earlier record: drop it first
		return tp
	}
	tp.u = s.unsettledOver(t.Key, cur)
	tp.how.record = func(tmp fs.FileInfo) error {
		v, err := s.commitPublished(t, verb, cur, tmp, at, data, perm, tp.u, w, also)
		tp.v, tp.tmpFP, tp.recorded = v, fingerprintOf(tmp), err == nil
		return err
	}
	tp.how.undo = tp.undo
	return tp
}

// finish commits a synced publish, or, for an unsynced one, hands it to
// the settler with the stat of the file published (fi).
func (tp *toolPub) finish(fi fs.FileInfo) (Version, error) {
	if tp.u == nil {
		return tp.s.commitPublished(tp.t, tp.verb, tp.prior, fi, tp.at, tp.data, tp.perm, nil, tp.w, tp.also)
	}
	var fp fingerprint
	if fi != nil {
		fp = fingerprintOf(fi)
	}
	tp.s.noteUnsettled(tp.t.Key, *tp.u, tp.tmpFP, fp)
	return tp.v, nil
}

// undo records what the path holds after a publish whose record committed
// but whose rename or link then failed: the record names bytes that never
// took the name, and must not be put back after a cut.
func (tp *toolPub) undo() {
	s, key := tp.s, tp.t.Key
	c := change{writer: tp.w, at: s.now()} // no file: a deletion
	if fi, err := s.lstatKey(key); err == nil {
		rc, err := s.readForCapture(Target{Key: key, Display: key}, s.now(), External, false)
		if err != nil {
			s.logErr("record a tool write that did not take its name", key, err)
			return
		}
		c = rc
		c.fp = fingerprintOf(fi)
	}
	s.logErr("record a tool write that did not take its name", key, s.commit([]string{key}, []change{c}))
}

// commitPublished records, in one index transaction, what the store found
// before the write (an external change, if any) and the version the tool just
// published: the hash of the bytes written, with the fingerprint the file has
// after the rename, which is what later stats will see. The caller's also
// run in that same transaction. Its failure is ReasonIndex, with v: the
// file is published, the index does not know (the next access rehashes it,
// and the replaced bytes were kept first, keepPrior), and the caller must
// hear so rather than report a recorded version. An unsynced publish
// (u set) is recorded as unsettled, with its bytes, in the same commit,
// before its rename (toolPub): fi is then the temp file's, and the settler
// records the fingerprint the rename left.
func (s *Store) commitPublished(t Target, verb string, prior snapshot, fi fs.FileInfo, at time.Time, data []byte, perm fs.FileMode, u *unsettled, w Writer, also []AlsoCommit) (Version, error) {
	v := Sum(data)
	var fp fingerprint // none: forces a rehash on the next access
	if fi != nil {
		fp = fingerprintOf(fi)
	}
	var keep []byte
	if s.objects.keeps(int64(len(data))) {
		keep = data
	}
	keys, cs := []string{}, []change{}
	if c, ok := s.snapshotRecord(t.Key, prior); ok {
		keys, cs = append(keys, t.Key), append(cs, c)
	}
	c := change{version: v, fp: fp, size: int64(len(data)), writer: w, at: at, data: keep, created: prior.fi == nil, also: also}
	if u != nil {
		u.Version, u.Size, u.Perm, u.Seq = v, int64(len(data)), perm, s.settle.seq.Add(1)
		c.unsettled = u
	}
	keys, cs = append(keys, t.Key), append(cs, c)
	if err := s.commit(keys, cs); err != nil {
		return v, indexError(verb, t.Display, err)
	}
	return v, nil
}

// snapshotRecord is the change recordSnapshot would make for snap, keeping
// the bytes it read: the version a tool write replaced stays restorable.
// ok is false for a snapshot that records nothing: a non-regular file, a
// stat alone, a file the mount is writing.
func (s *Store) snapshotRecord(key string, snap snapshot) (change, bool) {
	if snap.statOnly || snap.fi != nil && !snap.fi.Mode().IsRegular() || s.mount.writing(key) {
		return change{}, false
	}
	c := change{version: snap.version, fp: snap.fp, size: sizeOf(snap.fi), writer: External, at: snap.at}
	if snap.data != nil && s.objects.keeps(int64(len(snap.data))) {
		c.data = snap.data
	}
	return c, true
}

// pubHow says how publish places the bytes.
type pubHow struct {
	// create hard-links the file into place: it must not replace one.
	create bool
	// record, when set, makes the publish unsynced (settle.go): neither the
	// file nor its directory is synced, and record commits the index's
	// record of it, with its bytes, right before the rename or link, given
	// the temp file's stat. If that then fails, undo records what the path
	// holds instead.
	record func(tmp fs.FileInfo) error
	undo   func()
	// nosync leaves the file and its directory unsynced: the caller makes
	// them durable later, all at once (a merge, mergeapply.go).
	nosync bool
}

// publish makes data the content of t atomically: a temp file in the same
// directory is written, given perm and owner (nil: prior's owner, when the store may),
// fsynced, then renamed over the target, or hard-linked for a create that
// must not replace anything (how.create), and the directory synced: the new name is
// durable before the index records it, unless how.record is set. Missing parents are created (and
// synced into theirs). Every step is
// made relative to one descriptor of the target's directory, opened
// without following a link (keydir.go): a directory swapped for a link
// meanwhile can neither redirect the publish nor strand the temp file. A
// symlink is never replaced: resolution already points t at the link's
// target, and a dangling link is not a regular file. On failure nothing is
// left behind and the target is untouched. It returns the stat of the
// published file.
func (s *Store) publish(ctx context.Context, t Target, verb string, data []byte, perm fs.FileMode, owner *Owner, prior *snapshot, how pubHow) (fs.FileInfo, error) {
	if ctx.Err() != nil {
		return nil, fail(ReasonAborted, verb, "")
	}
	var fi fs.FileInfo
	err := s.inKeyDir(t.Key, true, func(d keyDir) (err error) {
		fi, err = s.publishIn(ctx, d, t, verb, data, perm, owner, prior, how)
		return err
	})
	if err != nil {
		return nil, osError(verb, t.Display, err)
	}
	return fi, nil
}

// publishIn is publish in the target's open directory d. Bytes with a
// known owner (put back by a restore or rewind) go only into a directory
// their owner or root owns.
func (s *Store) publishIn(ctx context.Context, d keyDir, t Target, verb string, data []byte, perm fs.FileMode, owner *Owner, prior *snapshot, how pubHow) (fs.FileInfo, error) {
	if owner != nil {
		if err := dirOwnerConflict(d, t, verb, owner); err != nil {
			return nil, err
		}
	}
	synced := how.record == nil && !how.nosync
	tmp, err := s.writeTemp(d, data, perm, owner, prior.fi, synced)
	if err != nil {
		return nil, osError(verb, t.Display, err)
	}
	defer d.remove(tmp) // a no-op once renamed or unlinked below
	if s.beforePublish != nil {
		s.beforePublish()
	}
	if ctx.Err() != nil {
		// The last point at which a cancelled call changes nothing.
		return nil, fail(ReasonAborted, verb, "")
	}
	if how.create {
		if err := recordFirst(d, tmp, how); err != nil {
			return nil, err
		}
		if err := d.link(tmp, d.name); err != nil {
			undoRecord(how)
			return nil, s.createFailure(d, t, err)
		}
		d.remove(tmp) // before the stat: the extra name changes ctime and nlink
	} else {
		// The snapshot was checked under the lock, but a process writing
		// straight into the backing directory does not take it: look once
		// more, as late as possible, so such a write is not replaced unseen.
		fi, err := d.lstat(d.name)
		switch {
		case err == nil && !fi.Mode().IsRegular():
			return nil, fail(ReasonNotRegular, verb, t.Display)
		case err == nil && prior.fi == nil, err != nil && prior.fi != nil,
			err == nil && fingerprintOf(fi) != prior.fp:
			return nil, fail(ReasonChanged, verb, t.Display)
		}
		if err := recordFirst(d, tmp, how); err != nil {
			return nil, err
		}
		if err := d.rename(tmp, d.name); err != nil {
			undoRecord(how)
			return nil, osError(verb, t.Display, err)
		}
	}
	if synced { // else durable with the caller's commit, settled later (settle.go)
		if err := d.sync(); err != nil {
			// Published, perhaps not durably: not acknowledged.
			return nil, osError(verb, t.Display, err)
		}
	}
	if s.afterPublish != nil {
		s.afterPublish()
	}
	fi, err := d.lstat(d.name)
	if err != nil {
		// Published, but it vanished at once: the next access rehashes.
		return nil, nil
	}
	return fi, nil
}

// recordFirst commits an unsynced publish's record, if how has one, with
// the stat of its temp file tmp in d.
func recordFirst(d keyDir, tmp string, how pubHow) error {
	if how.record == nil {
		return nil
	}
	fi, err := d.lstat(tmp)
	if err != nil {
		return err
	}
	return how.record(fi)
}

// undoRecord records what the path holds after a recorded publish failed.
func undoRecord(how pubHow) {
	if how.undo != nil {
		how.undo()
	}
}

// writeTemp writes data to a new temp file in d, synced if sync, and
// returns its name.
func (s *Store) writeTemp(d keyDir, data []byte, perm fs.FileMode, owner *Owner, prior fs.FileInfo, sync bool) (string, error) {
	tmp := tempName(d.name)
	f, err := d.open(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm) // exact bits, whatever the process umask
	}
	if err == nil && owner != nil {
		err = giveOwner(f, owner)
	} else if err == nil && prior != nil {
		chownLike(f, prior)
	}
	if err == nil && prior != nil {
		err = keepACL(f, d.fd, d.name)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		d.remove(tmp)
		return "", err
	}
	return tmp, nil
}

// chownLike gives f the owner of prior when they differ and the process may
// (a root daemon keeps a user's file theirs). Failure is not an error: the
// reference implementation never preserves ownership.
func chownLike(f *os.File, prior fs.FileInfo) {
	uid, gid, ok := ownerOf(prior)
	if !ok {
		return
	}
	if mine, err := f.Stat(); err == nil {
		if u, g, ok := ownerOf(mine); ok && u == uid && g == gid {
			return
		}
	}
	f.Chown(uid, gid)
}

// tempName is a hidden, unique sibling name that fits in NAME_MAX.
func tempName(base string) string {
	var r [6]byte
	rand.Read(r[:])
	const maxBase = 200
	if len(base) > maxBase {
		base = base[:maxBase]
	}
	return fmt.Sprintf(".%s.dshfs-%s.tmp", base, hex.EncodeToString(r[:]))
}

// createFailure maps a failed no-replace publish the way the reference
// implementation does.
func (s *Store) createFailure(d keyDir, t Target, err error) error {
	fi, lerr := d.lstat(d.name)
	switch {
	case lerr == nil && !fi.Mode().IsRegular():
		return fail(ReasonNotRegular, "write", t.Display)
	case lerr == nil, errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.EEXIST):
		return fail(ReasonExists, "write", t.Display)
	}
	return osError("write", t.Display, err)
}
