package versionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// A merge is applied whole or not at all, even across a crash. Before the
// first file changes, one durable commit keeps the bytes each file about to
// be replaced holds, and another records the merge's intent (the merges
// bucket): its step and, for each path, the workspace's version before the
// merge and the branch's version it writes. The files are then applied,
// several at once, each under its own lock with compare-and-swap, published
// without a sync of their own and recorded by the group committer; one sync
// of the workspace's filesystem then makes them all durable, and only after
// it is the intent dropped. Against a file each, a merge of 1,000 files paid
// 4 syncs a file (the temp file's, its directory's, two for the index's
// commit) one after another.
//
// A cut (kill -9, a power failure) before the intent is dropped leaves it,
// and Open, before anything is served, rolls the merge back: every file
// showing the branch's bytes, or what a cut leaves of them, gets the
// workspace's bytes from before the merge again (they were kept first), and
// the merge's checkpoint goes, so `branch merge` runs again as new. A file
// showing anything else was changed after the merge wrote it: it is left
// as it is, and logged. Back rather than forward: the caller never heard
// the merge succeed; the bytes from before are in the index, while the
// branch's bytes of files not applied yet are only in the branch's layer,
// which the store does not own; and a merge replayed after the crash would
// need a new plan anyway. A merge touches nothing in the branch, so the
// branch is as it was.

// mergeWorkers is how many files a merge applies at once: their index
// commits share transactions (groupcommit.go), so the count bounds how
// many share one. With 8, a 1,000-file merge took 0.9–2.2 s through the
// CLI on a loaded 2-core host; with 32, 1.0–1.6 s.
const mergeWorkers = 32

// mergeIntent is a merge being applied.
type mergeIntent struct {
	Step  string       `json:"step"`
	Items []intentItem `json:"items"`
}

// intentItem is one file of a merge being applied.
type intentItem struct {
	Path   string  `json:"path"`
	Main   Version `json:"main"`             // the workspace's before the merge; zero: no file
	Branch Version `json:"branch,omitempty"` // what the merge writes; zero: it removes the file
}

// MergePauseEnv names a variable for crash tests alone: set to N, a merge
// stops after applying N files, until its request is cancelled, so that a
// test can kill the daemon in the middle of it. Unset (the default), it
// does nothing.
const MergePauseEnv = "DSHFS_TEST_MERGE_PAUSE_AFTER"

// mergeKeepBatch bounds the bytes a merge holds to keep in one commit
// before it applies anything.
const mergeKeepBatch = 64 << 20

// errNotTried marks a change a merge stopped before applying.
var errNotTried = errors.New("not tried")

// mergeApply writes the clean part of the plan, crash-atomically. Without
// Partial, a change refused when applied (the file changed after the plan
// looked) undoes the ones applied, so the workspace is as before the merge.
func (s *Store) mergeApply(ctx context.Context, res *MergeResult, data map[string]BranchChange, o MergeOptions) error {
	todo := applicable(res.Items)
	if len(todo) == 0 {
		return nil
	}
	if err := s.mergeBegin(res.Step, res.Items, todo); err != nil {
		return err
	}
	errs := s.applyAll(ctx, res, todo, data, o.Partial)
	undo, cause := tally(res, todo, errs, o.Partial)
	var failure error
	if !undo {
		if failure = s.syncMerged(); failure != nil {
			failure = fmt.Errorf("merge %s: sync the merged files: %w", res.Step, failure)
			undo, cause = true, failure
		}
	}
	if undo {
		if err := s.mergeUndo(context.WithoutCancel(ctx), res, cause); err != nil {
			failure = err
		}
	}
	return s.mergeEnd(res.Step, failure)
}

// syncMerged makes a merge's files and directories durable.
func (s *Store) syncMerged() error {
	if s.mergeSyncFault != nil {
		return s.mergeSyncFault
	}
	return s.syncWorkspace()
}

// applicable is the indexes of the items a merge writes or removes (a
// line merge writes its merged version).
func applicable(items []MergeItem) []int {
	var todo []int
	for i, it := range items {
		if it.applies() {
			todo = append(todo, i)
		}
	}
	return todo
}

// mergeBegin keeps the bytes the merge will replace and records its
// intent, each durably, before any file changes.
func (s *Store) mergeBegin(step string, items []MergeItem, todo []int) error {
	in := mergeIntent{Step: step}
	var keys []string
	var cs []change
	held := 0
	for n, i := range todo {
		it := items[i]
		in.Items = append(in.Items, intentItem{Path: it.Path, Main: it.Main, Branch: it.result()})
		if c, ok := s.replacedBytes(it); ok {
			keys, cs, held = append(keys, it.Path), append(cs, c), held+len(c.data)
		}
		if len(cs) > 0 && (held >= mergeKeepBatch || n == len(todo)-1) {
			if err := s.commit(keys, cs); err != nil {
				return indexError("merge", "", err)
			}
			keys, cs, held = nil, nil, 0
		}
	}
	v, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if err := s.commits.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMerges).Put([]byte(step), v) }); err != nil {
		return indexError("merge", "", err)
	}
	return nil
}

// replacedBytes is the change keeping the bytes of it.Main, read from the
// workspace, when they are not kept yet. Bytes that no longer hash to
// it.Main are not the merge's to keep: its compare-and-swap refuses that
// file.
func (s *Store) replacedBytes(it MergeItem) (change, bool) {
	if it.Main.IsZero() {
		return change{}, false
	}
	if ok, err := s.kept(it.Main); err != nil || ok {
		return change{}, false
	}
	unlock := s.locks.Lock(it.Path)
	defer unlock()
	cur, err := s.snapshotLocked(Target{Key: it.Path, Display: it.Path}, "merge", s.objects.maxKeep+1)
	if err != nil || cur.version != it.Main || cur.data == nil || !s.objects.keeps(int64(len(cur.data))) {
		return change{}, false
	}
	return change{version: cur.version, data: cur.data, keepOnly: true}, true
}

// applyAll applies the items todo names, mergeWorkers at once, and returns
// each one's error (errNotTried: stopped before it). Without partial, the
// first refusal stops the rest; with it, only an index failure does.
func (s *Store) applyAll(ctx context.Context, res *MergeResult, todo []int, data map[string]BranchChange, partial bool) []error {
	errs := make([]error, len(todo))
	for k := range errs {
		errs[k] = errNotTried
	}
	var next, applied atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	w := Writer{Kind: WriterRestore, Actor: res.Step}
	pause := mergePause()
	for range min(mergeWorkers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1)) - 1; k < len(todo) && !stop.Load(); k = int(next.Add(1)) - 1 {
				it := res.Items[todo[k]]
				err := s.mergeOne(ctx, it, data[it.Path].Data, data[it.Path].Perm, w)
				errs[k] = err
				if err != nil && (!partial || errors.Is(err, errIndexStop)) {
					stop.Store(true)
				}
				if err == nil && pause > 0 && applied.Add(1) >= pause {
					<-ctx.Done()
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

// mergePause is the number of files after which a merge pauses
// (MergePauseEnv), or 0.
func mergePause() int64 {
	n, _ := strconv.ParseInt(os.Getenv(MergePauseEnv), 10, 64)
	return n
}

// tally records in res what applyAll did: the applied files, and each
// refused one as a conflict. undo reports that the merge must be taken
// back (a refusal without partial, or an index failure), err the first
// such failure.
func tally(res *MergeResult, todo []int, errs []error, partial bool) (undo bool, err error) {
	for k, i := range todo {
		it := &res.Items[i]
		switch e := errs[k]; {
		case e == errNotTried:
		case e == nil:
			it.Applied = true
			res.Applied++
		default:
			it.Op, it.Conflict = "conflict", e.Error()
			res.Conflicts++
			if !partial || errors.Is(e, errIndexStop) {
				undo = true
				if err == nil {
					err = e
				}
			}
		}
	}
	return undo, err
}

// mergeUndo takes back the merge's applied changes after the failure
// cause, and says so if that fails. The merge is refused.
func (s *Store) mergeUndo(ctx context.Context, res *MergeResult, cause error) error {
	res.Refused = true
	if res.Applied == 0 {
		return nil
	}
	rr, rerr := s.Rewind(ctx, res.Step, RewindOptions{Actor: res.Step, Writer: Writer{Kind: WriterRestore, Actor: res.Step}})
	if rerr == nil && rr.Conflicts > 0 {
		rerr = fmt.Errorf("%d files changed meanwhile", rr.Conflicts)
	}
	for i := range res.Items {
		res.Items[i].Applied = false
	}
	res.Applied = 0
	if rerr != nil {
		return fmt.Errorf("merge %s: %w; undoing what it had applied failed: %w", res.Step, cause, rerr)
	}
	return nil
}

// mergeEnd drops the intent of the merge step, once its outcome, err, is
// durable: applied and synced, or taken back.
func (s *Store) mergeEnd(step string, err error) error {
	derr := s.commits.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMerges).Delete([]byte(step)) })
	if derr != nil && err == nil {
		return indexError("merge", "", derr)
	}
	return err
}
