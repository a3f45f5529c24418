package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// Options tune a Replicator.
type Options struct {
	// Writer names this replica's writer: the same name resumes the
	// prefix after a restart, another is refused unless Takeover.
	Writer string
	// Takeover makes this writer the prefix's, fencing the one before:
	// its next head write is refused and it stops.
	Takeover bool
	// Interval is how often the journal is looked at (default 250 ms).
	Interval time.Duration
	// MaxEntries bounds a segment (default 10,000 journal entries).
	MaxEntries int
	// TreeInterval is how often, at most, the workspace's shape is
	// described while the journal grows (default 30 s); it is also
	// described at each new checkpoint and when the replicator stops.
	TreeInterval time.Duration
	// Scrub reads back every object the bucket holds before shipping more,
	// checks it against its version, and sends again from the store the
	// damaged or missing ones it still keeps.
	Scrub  bool
	Logger *slog.Logger
}

// Status is how far the replica is.
type Status struct {
	Remote     string    `json:"remote"`
	ShippedSeq uint64    `json:"shipped_seq"`
	Segments   uint64    `json:"segments"`
	Error      string    `json:"error,omitempty"`
	ErrorSince time.Time `json:"error_since,omitzero"`
	Fenced     bool      `json:"fenced,omitempty"`
	// Damaged names the objects in the bucket that failed their check and
	// whose bytes the store no longer keeps to send again.
	Damaged []string `json:"damaged,omitempty"`
	// LocalSeq is the journal's last entry; Lag is how long the oldest
	// entry not shipped has waited (zero when the replica is current).
	LocalSeq uint64        `json:"local_seq"`
	Lag      time.Duration `json:"lag_ns"`
}

// Replicator ships a store's history to a bucket in the background.
type Replicator struct {
	store *versionstore.Store
	b     *Bucket
	opts  Options
	codec *codec

	// Owned by the shipping goroutine (and Start before it).
	etag    string
	n       uint64
	segKey  string
	seq     uint64
	cps     []versionstore.Checkpoint
	shipped map[versionstore.Version]objectRef // where the chain has each object
	trees   treeState
	// scrubbed: every object the chain names was read back and checked
	// (or Options.Scrub is off).
	scrubbed bool
	draining bool // Close was called: ship the mount's queued versions too

	mu     sync.Mutex
	status Status

	stop chan time.Duration // the drain's bound
	done chan error
}

// Start claims the bucket's prefix for opts.Writer (ErrTaken if another
// writer has it and opts.Takeover is not set), reads back what is shipped
// already, and ships the rest in the background until Close.
func Start(ctx context.Context, store *versionstore.Store, b *Bucket, opts Options) (*Replicator, error) {
	if opts.Interval <= 0 {
		opts.Interval = 250 * time.Millisecond
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 10000
	}
	if opts.TreeInterval <= 0 {
		opts.TreeInterval = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c, err := newCodec()
	if err != nil {
		return nil, err
	}
	r := &Replicator{store: store, b: b, opts: opts, codec: c, shipped: map[versionstore.Version]objectRef{},
		scrubbed: !opts.Scrub, trees: treeState{due: true},
		stop: make(chan time.Duration), done: make(chan error, 1)}
	if err := r.claim(ctx); err != nil {
		return nil, err
	}
	r.status = Status{Remote: b.Location().String(), ShippedSeq: r.seq, Segments: r.n}
	go r.run()
	return r, nil
}

// claim reads the head, or creates it, and takes the prefix.
func (r *Replicator) claim(ctx context.Context) error {
	data, etag, err := r.b.Get(ctx, headKey, "")
	if errors.Is(err, ErrNotFound) {
		h := head{Format: formatName, Writer: r.opts.Writer, Time: time.Now().UTC()}
		body, _ := json.MarshalIndent(h, "", " ")
		if r.etag, err = r.b.Put(ctx, headKey, body, Condition{IfNoneMatch: "*"}); errors.Is(err, ErrPrecondition) {
			return fmt.Errorf("%s: %w (it started at the same time)", r.b.Location(), ErrTaken)
		}
		return err
	}
	if err != nil {
		return err
	}
	h, err := decodeHead(data)
	if err != nil {
		return err
	}
	if err := r.checkAhead(h); err != nil {
		return err
	}
	if h.Writer != r.opts.Writer {
		if !r.opts.Takeover {
			return fmt.Errorf("%s: %w (%s, last shipped %s)", r.b.Location(), ErrTaken, h.Writer, h.Time.Format(time.RFC3339))
		}
		h.Writer, h.Time = r.opts.Writer, time.Now().UTC()
		body, _ := json.MarshalIndent(h, "", " ")
		if etag, err = r.b.Put(ctx, headKey, body, Condition{IfMatch: etag}); err != nil {
			return fmt.Errorf("take over %s: %w", r.b.Location(), err)
		}
	}
	r.etag, r.n, r.segKey, r.seq = etag, h.N, h.Segment, h.Seq
	return r.loadShipped(ctx)
}

// ErrOtherHistory is wrapped by the error of a replicator whose store's
// journal is behind the prefix's: the prefix holds another workspace's
// history (or this one's from before its state was lost), which this
// store's entries must not be numbered into.
var ErrOtherHistory = errors.New("it holds a longer history than this workspace's journal")

// checkAhead refuses a prefix that has shipped entries this store never
// had: going on from h.Seq would skip the store's own entries up to it.
func (r *Replicator) checkAhead(h head) error {
	local, err := r.store.JournalSeq()
	if err != nil {
		return err
	}
	if local < h.Seq {
		return fmt.Errorf("%s: %w (entry %d there, %d here); give the workspace a prefix of its own", r.b.Location(), ErrOtherHistory, h.Seq, local)
	}
	return nil
}

// loadShipped learns which objects and checkpoints the segments hold.
func (r *Replicator) loadShipped(ctx context.Context) error {
	segs, err := readChain(ctx, r.b, r.segKey)
	if err != nil {
		return err
	}
	for _, s := range segs {
		for v, ref := range s.Objects {
			r.shipped[v] = ref
		}
		r.cps = s.Checkpoints
	}
	return nil
}

func decodeHead(data []byte) (head, error) {
	var h head
	if err := json.Unmarshal(data, &h); err != nil {
		return h, fmt.Errorf("decode %s: %w", headKey, err)
	}
	if h.Format != formatName {
		return h, fmt.Errorf("decode %s: format %q is not %q", headKey, h.Format, formatName)
	}
	return h, nil
}

// Status is how far the replica is, and what went wrong last.
func (r *Replicator) Status() Status {
	r.mu.Lock()
	st := r.status
	r.mu.Unlock()
	seq, err := r.store.JournalSeq()
	if err != nil {
		return st
	}
	st.LocalSeq = seq
	if seq > st.ShippedSeq {
		if next, err := r.store.JournalAfter(st.ShippedSeq, 1); err == nil && len(next) == 1 {
			st.Lag = max(time.Since(next[0].Time), 0)
		}
	}
	return st
}
