package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// shipOnce ships the journal entries after the last shipped, at most
// maxEntries, and the checkpoints if they changed, as one segment: first
// the bytes of the versions it names for the first time, then the
// segment, then the head (If-Match). It reports whether anything was
// left to ship.
func (r *Replicator) shipOnce(ctx context.Context) (shipped bool, err error) {
	entries, cps, t, err := r.pending(ctx)
	if err != nil || len(entries) == 0 && slices.Equal(cps, r.cps) && t == nil {
		return false, err
	}
	seg := segment{Format: formatName, N: r.n + 1, Prev: r.segKey, Writer: r.opts.Writer,
		Entries: entries, Checkpoints: cps}
	if seg.Entries == nil {
		seg.Entries = []versionstore.JournalEntry{}
	}
	if seg.Objects, err = r.shipObjects(ctx, shippable(entries, t)); err != nil {
		return false, err
	}
	seq := r.seq
	if len(entries) > 0 {
		seq = entries[len(entries)-1].Seq
	}
	if t != nil {
		if seg.Tree, err = r.putTree(ctx, t); err != nil {
			return false, err
		}
		seq = max(seq, t.Seq)
	}
	if err := r.putSegment(ctx, seg, seq); err != nil {
		return false, err
	}
	r.cps = cps
	if t != nil {
		r.trees.body, r.trees.due = t.body, false
	}
	return true, nil
}

// pending is what the next segment holds: the journal entries after the
// last shipped, the checkpoints, and a tree if one is due.
func (r *Replicator) pending(ctx context.Context) ([]versionstore.JournalEntry, []versionstore.Checkpoint, *tree, error) {
	cps, err := r.store.Checkpoints()
	if err != nil {
		return nil, nil, nil, err
	}
	if cps == nil {
		cps = []versionstore.Checkpoint{}
	}
	t, err := r.dueTree(ctx, !slices.Equal(cps, r.cps))
	if err != nil {
		return nil, nil, nil, err
	}
	// While the mount runs, what its batches committed; a drain commits
	// the last batch first.
	journal := r.store.CommittedJournalAfter
	if r.draining {
		journal = r.store.JournalAfter
	}
	entries, err := journal(r.seq, r.opts.MaxEntries)
	if err != nil {
		return nil, nil, nil, err
	}
	entries, t = fitTree(entries, t, r.opts.MaxEntries)
	return entries, cps, t, nil
}

// putSegment writes seg, then the head naming it as shipped through seq.
func (r *Replicator) putSegment(ctx context.Context, seg segment, seq uint64) error {
	key := segmentKey(seg.N, r.opts.Writer)
	data, err := json.MarshalIndent(seg, "", " ")
	if err != nil {
		return err
	}
	// The key is this writer's own: a segment a crash left there unnamed
	// by the head is replaced.
	if _, err := r.b.Put(ctx, key, data, Condition{}); err != nil {
		return err
	}
	if err := r.putHead(ctx, key, seg.N, seq); err != nil {
		return err
	}
	for v, ref := range seg.Objects {
		r.shipped[v] = ref
	}
	r.n, r.segKey, r.seq = seg.N, key, seq
	return nil
}

// shippable lists the versions entries and t name, in order, once each.
func shippable(entries []versionstore.JournalEntry, t *tree) []versionstore.Version {
	var vs []versionstore.Version
	for _, e := range entries {
		vs = append(vs, e.Prev, e.Version)
	}
	if t != nil {
		for _, e := range t.Entries {
			vs = append(vs, e.Version)
		}
	}
	return vs
}

// putHead names the segment just written, unless another writer took the
// prefix meanwhile.
func (r *Replicator) putHead(ctx context.Context, key string, n, seq uint64) error {
	h := head{Format: formatName, Writer: r.opts.Writer, Segment: key, N: n, Seq: seq, Time: time.Now().UTC()}
	data, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return err
	}
	etag, err := r.b.Put(ctx, headKey, data, Condition{IfMatch: r.etag})
	if errors.Is(err, ErrPrecondition) {
		return r.recheckHead(ctx, key)
	}
	if err != nil {
		return err
	}
	r.etag = etag
	return nil
}

// recheckHead reads the head after a refused write. A write whose answer
// was lost (the connection cut after the server took it) changed the ETag
// while the head is still this writer's: then it is adopted, and the write
// done if the head names key. Any other writer has taken the prefix.
func (r *Replicator) recheckHead(ctx context.Context, key string) error {
	data, etag, err := r.b.Get(ctx, headKey, "")
	if err != nil {
		return err
	}
	h, err := decodeHead(data)
	if err != nil {
		return err
	}
	if h.Writer != r.opts.Writer {
		return fmt.Errorf("%s: %w (%s took over since this dshfs started)", r.b.Location(), ErrTaken, h.Writer)
	}
	r.etag = etag
	if h.Segment != key {
		return fmt.Errorf("put %s: %w; tried again", headKey, ErrPrecondition)
	}
	return nil
}

// shipObjects uploads the kept bytes of vs not shipped before, as they
// are stored (zstd frames, not decompressed again): small ones in packs,
// large ones on their own. Versions whose bytes are not kept are left out.
func (r *Replicator) shipObjects(ctx context.Context, vs []versionstore.Version) (map[versionstore.Version]objectRef, error) {
	refs := map[versionstore.Version]objectRef{}
	var p pack
	for _, v := range vs {
		if err := ctx.Err(); err != nil {
			return nil, err // a drain's bound passed
		}
		if _, done := refs[v]; done || v.IsZero() {
			continue
		}
		if _, done := r.shipped[v]; done {
			continue
		}
		z, size, err := r.store.ObjectFrame(v)
		if errors.Is(err, versionstore.ErrNotKept) || errors.Is(err, versionstore.ErrCorrupt) {
			continue // the journal still names it; nothing to ship
		}
		if err != nil {
			return nil, err
		}
		if err := r.addObject(ctx, &p, refs, v, z, size, r.putImmutable); err != nil {
			return nil, err
		}
	}
	return refs, r.flushPack(ctx, &p, refs, r.putImmutable)
}

// addObject puts a large object with put, or adds a small one to p
// (flushing p first if it is full).
func (r *Replicator) addObject(ctx context.Context, p *pack, refs map[versionstore.Version]objectRef, v versionstore.Version, z []byte, size int64, put putFunc) error {
	ref := objectRef{Len: int64(len(z)), Size: size}
	if len(z) > packLimit {
		ref.Key = objectKey(v)
		if err := put(ctx, ref.Key, z); err != nil {
			return err
		}
		refs[v] = ref
		return nil
	}
	if len(p.data)+len(z) > packMax {
		if err := r.flushPack(ctx, p, refs, put); err != nil {
			return err
		}
	}
	p.add(v, ref, z)
	return nil
}

// putFunc writes an object: putImmutable, or, to replace a damaged one,
// putAgain.
type putFunc func(ctx context.Context, key string, data []byte) error

// putImmutable writes a content-addressed object unless it is there.
func (r *Replicator) putImmutable(ctx context.Context, key string, data []byte) error {
	_, err := r.b.Put(ctx, key, data, Condition{IfNoneMatch: "*"})
	if errors.Is(err, ErrPrecondition) {
		return nil // the same bytes, from before a crash
	}
	return err
}

// pack gathers small compressed objects for one upload.
type pack struct {
	data []byte
	refs map[versionstore.Version]objectRef
}

func (p *pack) add(v versionstore.Version, ref objectRef, z []byte) {
	if p.refs == nil {
		p.refs = map[versionstore.Version]objectRef{}
	}
	ref.Off = int64(len(p.data))
	p.refs[v] = ref
	p.data = append(p.data, z...)
}

// flushPack uploads p under its hash and adds its objects to refs.
func (r *Replicator) flushPack(ctx context.Context, p *pack, refs map[versionstore.Version]objectRef, put putFunc) error {
	if len(p.refs) == 0 {
		return nil
	}
	key := packKey(p.data)
	if err := put(ctx, key, p.data); err != nil {
		return err
	}
	for v, ref := range p.refs {
		ref.Key = key
		refs[v] = ref
	}
	*p = pack{}
	return nil
}
