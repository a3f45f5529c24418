package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/dshfs/dshfs/versionstore"
)

// ErrNoHistory is wrapped by the error of a fetch from a prefix that holds
// no history.
var ErrNoHistory = errors.New("no dshfs history there")

// History is a workspace's history as its replica holds it.
type History struct {
	Writer      string
	Entries     []versionstore.JournalEntry // oldest first
	Checkpoints []versionstore.Checkpoint
	Segments    int
	refs        map[versionstore.Version]objectRef
	tree        *treeRef // the newest
	b           *Bucket
	codec       *codec
}

// Fetch reads the history at b: the head, then every segment back from the
// newest. The entries must follow each other in order, with no number
// twice.
func Fetch(ctx context.Context, b *Bucket) (*History, error) {
	data, _, err := b.Get(ctx, headKey, "")
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%s: %w", b.Location(), ErrNoHistory)
	}
	if err != nil {
		return nil, err
	}
	h, err := decodeHead(data)
	if err != nil {
		return nil, err
	}
	segs, err := readChain(ctx, b, h.Segment)
	if err != nil {
		return nil, err
	}
	c, err := newCodec()
	if err != nil {
		return nil, err
	}
	out := &History{Writer: h.Writer, Segments: len(segs), refs: map[versionstore.Version]objectRef{}, b: b, codec: c}
	for _, s := range segs {
		for _, e := range s.Entries {
			if n := len(out.Entries); n > 0 && e.Seq <= out.Entries[n-1].Seq {
				return nil, fmt.Errorf("read %s: journal entry %d after %d", segmentKey(s.N, s.Writer), e.Seq, out.Entries[n-1].Seq)
			}
			out.Entries = append(out.Entries, e)
		}
		for v, ref := range s.Objects {
			out.refs[v] = ref
		}
		out.Checkpoints = s.Checkpoints
		if s.Tree != nil {
			out.tree = s.Tree
		}
	}
	return out, nil
}

// readChain reads the segments from newest back to the first, and returns
// them oldest first.
func readChain(ctx context.Context, b *Bucket, newest string) ([]segment, error) {
	var segs []segment
	for key := newest; key != ""; {
		data, _, err := b.Get(ctx, key, "")
		if err != nil {
			return nil, fmt.Errorf("read the history's segments: %w", err)
		}
		var s segment
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("decode %s: %w", key, err)
		}
		if s.Format != formatName {
			return nil, fmt.Errorf("decode %s: format %q is not %q", key, s.Format, formatName)
		}
		segs = append(segs, s)
		key = s.Prev
	}
	slices.Reverse(segs)
	return segs, nil
}

// Has reports whether the replica holds the bytes of v.
func (h *History) Has(v versionstore.Version) bool {
	_, ok := h.refs[v]
	return ok
}

// Object fetches the bytes of v and checks them against v.
func (h *History) Object(ctx context.Context, v versionstore.Version) ([]byte, error) {
	ref, ok := h.refs[v]
	if !ok {
		return nil, fmt.Errorf("%s: %w", v, versionstore.ErrNotKept)
	}
	if ref.Off < 0 || ref.Len <= 0 {
		return nil, fmt.Errorf("%s in %s: %w (offset %d, length %d)", v.Short(), ref.Key, versionstore.ErrCorrupt, ref.Off, ref.Len)
	}
	z, _, err := h.b.Get(ctx, ref.Key, fmt.Sprintf("bytes=%d-%d", ref.Off, ref.Off+ref.Len-1))
	if err != nil {
		return nil, err
	}
	data, err := h.codec.open(v, z, ref.Size)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", v.Short(), ref.Key, err)
	}
	return data, nil
}

// Objects fetches every object the replica holds, each pack once. Objects
// that fail their check are left out and named in damaged.
func (h *History) Objects(ctx context.Context) (objs map[versionstore.Version][]byte, damaged []error, err error) {
	byKey := map[string][]versionstore.Version{}
	for v, ref := range h.refs {
		byKey[ref.Key] = append(byKey[ref.Key], v)
	}
	objs = map[versionstore.Version][]byte{}
	for key, vs := range byKey {
		blob, _, err := h.b.Get(ctx, key, "")
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, nil, err
		}
		for _, v := range vs {
			ref := h.refs[v]
			z, ok := ref.in(blob)
			if err != nil || !ok {
				damaged = append(damaged, fmt.Errorf("%s in %s: %w (missing or cut short)", v.Short(), key, versionstore.ErrCorrupt))
				continue
			}
			data, oerr := h.codec.open(v, z, ref.Size)
			if oerr != nil {
				damaged = append(damaged, fmt.Errorf("%s in %s: %w", v.Short(), key, oerr))
				continue
			}
			objs[v] = data
		}
	}
	return objs, damaged, nil
}

// PathHistory is the versions of path the journal names, newest first, as
// the daemon shows a file renamed through the mount: its versions since it
// arrived at path, the rename one of them, a deletion one too. Versions a
// path had before dshfs saw it change (a first sighting) are in no journal
// entry, so not here; nor, for a file of a renamed directory, those it had
// at its old path.
func (h *History) PathHistory(path string) []versionstore.HistoryEntry {
	var out []versionstore.HistoryEntry
	for i := len(h.Entries) - 1; i >= 0; i-- {
		e := h.Entries[i]
		if e.Path != path || e.To != "" {
			continue // another path, or the half of a rename that left
		}
		he := versionstore.HistoryEntry{Version: e.Version, Size: e.Size, Time: e.Time, Writer: e.Writer, Deleted: e.Version.IsZero()}
		if he.Kept = h.Has(e.Version); !he.Kept && !he.Deleted {
			he.NotKept = "not in the bucket"
		}
		if out = append(out, he); e.From != "" {
			break // it arrived here
		}
	}
	return out
}
