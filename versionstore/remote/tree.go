package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// The workspace's shape goes to the bucket beside the journal: the
// journal names files and versions, not directories, symlinks or modes,
// nor the files a workspace held before dshfs saw them change. A tree is
// described when the replicator starts, at each new checkpoint, at most
// every TreeInterval while the journal grows, and when it stops; one
// equal to the last shipped is not sent again.

// treeState is what the shipping goroutine knows of the trees.
type treeState struct {
	due  bool      // describe the workspace at the next shipment
	at   time.Time // when it was last described
	seq  uint64    // the journal's end then
	body []byte    // the encoded entries of the last tree shipped
	// partial: the last tree had files whose version the index did not
	// know yet (the workspace not indexed): describe it again.
	partial bool
}

// dueTree describes the workspace if a tree is due: asked for (start,
// stop), a checkpoint changed, or the interval passed with the journal
// grown since. It is nil if none is due or the workspace is as the newest
// shipped tree describes it.
func (r *Replicator) dueTree(ctx context.Context, cpsChanged bool) (*tree, error) {
	if cpsChanged || r.intervalTree() {
		r.trees.due = true // until a segment holds it
	}
	if !r.trees.due {
		return nil, nil
	}
	entries, seq, err := r.store.Tree(ctx)
	if err != nil {
		return nil, err
	}
	if entries == nil {
		entries = []versionstore.TreeEntry{}
	}
	t := &tree{Format: formatName, Seq: seq, Time: time.Now().UTC(), Entries: entries}
	body, err := json.Marshal(t.Entries)
	if err != nil {
		return nil, err
	}
	r.trees.at, r.trees.seq, r.trees.partial = time.Now(), seq, partial(entries)
	if r.trees.body != nil && bytes.Equal(body, r.trees.body) {
		r.trees.due = false
		return nil, nil // as the last shipped says
	}
	t.body = body
	return t, nil
}

// partial reports whether a file of entries has no version yet.
func partial(entries []versionstore.TreeEntry) bool {
	for _, e := range entries {
		if e.Type == versionstore.TreeFile && e.Version.IsZero() {
			return true
		}
	}
	return false
}

// intervalTree reports whether the interval has passed since the last tree
// and the journal grew meanwhile, or that tree lacked versions.
func (r *Replicator) intervalTree() bool {
	if time.Since(r.trees.at) < r.opts.TreeInterval {
		return false
	}
	if r.trees.partial {
		return true
	}
	seq, err := r.store.JournalSeq()
	return err == nil && seq != r.trees.seq
}

// fitTree keeps t only if the segment can hold every journal entry up to
// it; the entries after t.Seq wait for the next segment.
func fitTree(entries []versionstore.JournalEntry, t *tree, limit int) ([]versionstore.JournalEntry, *tree) {
	if t == nil {
		return entries, nil
	}
	n := 0
	for n < len(entries) && entries[n].Seq <= t.Seq {
		n++
	}
	if len(entries) == limit && n == len(entries) && (n == 0 || entries[n-1].Seq < t.Seq) {
		return entries, nil // more before t.Seq than a segment holds
	}
	return entries[:n], t
}

// putTree uploads t, one zstd frame of its JSON, under the JSON's hash.
func (r *Replicator) putTree(ctx context.Context, t *tree) (*treeRef, error) {
	data, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	z := r.codec.enc.EncodeAll(data, nil)
	ref := &treeRef{Key: treeKey(data), Seq: t.Seq, Len: int64(len(z)), Size: int64(len(data))}
	return ref, r.putImmutable(ctx, ref.Key, z)
}

// readTree fetches the tree ref names and checks it against its key.
func (h *History) readTree(ctx context.Context, ref treeRef) (*tree, error) {
	z, _, err := h.b.Get(ctx, ref.Key, "")
	if err != nil {
		return nil, err
	}
	if ref.Size < 0 || ref.Size > maxTreeSize {
		return nil, fmt.Errorf("%s: %w (size %d)", ref.Key, versionstore.ErrCorrupt, ref.Size)
	}
	data, err := h.codec.decodeExactly(z, ref.Size)
	if err != nil || treeKey(data) != ref.Key {
		return nil, fmt.Errorf("%s: %w", ref.Key, versionstore.ErrCorrupt)
	}
	var t tree
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ref.Key, err)
	}
	return &t, nil
}

// Workspace is the workspace as of the newest journal entry: the newest
// tree, with the journal's changes after it applied to its files (a file
// the tree does not have gets mode 0644). Without a tree (a history
// shipped before trees were), it is the files the journal names, no
// directories beyond theirs and no symlinks.
func (h *History) Workspace(ctx context.Context) ([]versionstore.TreeEntry, error) {
	byPath := map[string]versionstore.TreeEntry{}
	var after uint64
	if h.tree != nil {
		t, err := h.readTree(ctx, *h.tree)
		if err != nil {
			return nil, fmt.Errorf("read the workspace's tree: %w", err)
		}
		for _, e := range t.Entries {
			byPath[e.Path] = e
		}
		after = t.Seq
	}
	for _, e := range h.Entries {
		if e.Seq > after {
			applyEntry(byPath, e)
		}
	}
	out := make([]versionstore.TreeEntry, 0, len(byPath))
	for _, e := range byPath {
		if !underFile(byPath, e.Path) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b versionstore.TreeEntry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// applyEntry changes the file e names as e says.
func applyEntry(byPath map[string]versionstore.TreeEntry, e versionstore.JournalEntry) {
	if e.Version.IsZero() {
		delete(byPath, e.Path)
		return
	}
	te, ok := byPath[e.Path]
	if !ok || te.Type != versionstore.TreeFile {
		te = versionstore.TreeEntry{Path: e.Path, Type: versionstore.TreeFile, Perm: 0o644}
		if from, ok := byPath[e.From]; ok && e.From != "" && from.Perm != 0 {
			te.Perm = from.Perm
		}
	}
	te.Version, te.Size = e.Version, e.Size
	byPath[e.Path] = te
}

// underFile reports whether an ancestor of path is not a directory: a
// tree's entry the journal's later changes made impossible.
func underFile(byPath map[string]versionstore.TreeEntry, path string) bool {
	for i := strings.LastIndexByte(path, '/'); i > 0; i = strings.LastIndexByte(path[:i], '/') {
		if e, ok := byPath[path[:i]]; ok && e.Type != versionstore.TreeDir {
			return true
		}
	}
	return false
}
