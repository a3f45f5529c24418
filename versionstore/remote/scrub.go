package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/dshfs/dshfs/versionstore"
)

// A scrub reads back every object the chain names — each pack and large
// object once — and checks each against its version. A damaged or missing
// one whose bytes the store still keeps is sent again, in a segment of no
// journal entries whose objects map names the new copy (the newest
// segment naming a version is where its bytes are); one the store no
// longer keeps is reported in the status.

// scrub checks the chain's objects and repairs what it can.
func (r *Replicator) scrub(ctx context.Context) error {
	bad, err := r.damaged(ctx)
	if err != nil {
		return err
	}
	refs, lost, err := r.resend(ctx, bad)
	if err != nil {
		return err
	}
	if len(refs) > 0 {
		seg := segment{Format: formatName, N: r.n + 1, Prev: r.segKey, Writer: r.opts.Writer,
			Entries: []versionstore.JournalEntry{}, Checkpoints: r.cps, Objects: refs}
		if seg.Checkpoints == nil {
			seg.Checkpoints = []versionstore.Checkpoint{}
		}
		if err := r.putSegment(ctx, seg, r.seq); err != nil {
			return err
		}
		r.opts.Logger.Warn("sent damaged remote objects again", "remote", r.b.Location().String(), "objects", len(refs))
	}
	r.mu.Lock()
	r.status.Damaged = lost
	r.mu.Unlock()
	if len(lost) > 0 {
		r.opts.Logger.Error("remote objects damaged and no longer kept here", "remote", r.b.Location().String(), "objects", lost)
	}
	r.scrubbed = true
	return nil
}

// damaged reads back the chain's objects and returns those that are
// missing, cut short or fail their check.
func (r *Replicator) damaged(ctx context.Context) ([]versionstore.Version, error) {
	byKey := map[string][]versionstore.Version{}
	for v, ref := range r.shipped {
		byKey[ref.Key] = append(byKey[ref.Key], v)
	}
	var bad []versionstore.Version
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		blob, _, err := r.b.Get(ctx, key, "")
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		for _, v := range byKey[key] {
			z, ok := r.shipped[v].in(blob)
			if err != nil || !ok {
				bad = append(bad, v)
				continue
			}
			if _, oerr := r.codec.open(v, z, r.shipped[v].Size); oerr != nil {
				bad = append(bad, v)
			}
		}
	}
	return bad, nil
}

// resend uploads again, overwriting, the objects of bad the store keeps,
// checked first; lost names the others.
func (r *Replicator) resend(ctx context.Context, bad []versionstore.Version) (map[versionstore.Version]objectRef, []string, error) {
	refs := map[versionstore.Version]objectRef{}
	var lost []string
	var p pack
	for _, v := range bad {
		if _, err := r.store.Object(v); err != nil {
			if errors.Is(err, versionstore.ErrNotKept) || errors.Is(err, versionstore.ErrCorrupt) {
				lost = append(lost, fmt.Sprintf("%s in %s", v.Short(), r.shipped[v].Key))
				continue
			}
			return nil, nil, err
		}
		z, size, err := r.store.ObjectFrame(v)
		if err != nil {
			return nil, nil, err
		}
		if err := r.addObject(ctx, &p, refs, v, z, size, r.putAgain); err != nil {
			return nil, nil, err
		}
	}
	return refs, lost, r.flushPack(ctx, &p, refs, r.putAgain)
}

// putAgain writes an object whose key may hold damaged bytes: without the
// If-None-Match that would keep them.
func (r *Replicator) putAgain(ctx context.Context, key string, data []byte) error {
	_, err := r.b.Put(ctx, key, data, Condition{})
	return err
}
