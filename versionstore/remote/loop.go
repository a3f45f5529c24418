package remote

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// maxBackoff bounds the wait between tries while the remote fails.
const maxBackoff = 30 * time.Second

// run ships whenever the journal grew, backing off while the remote
// fails, until Close; then it drains.
func (r *Replicator) run() {
	tick := time.NewTicker(r.opts.Interval)
	defer tick.Stop()
	var wait time.Duration
	next := time.Now()
	for {
		select {
		case bound := <-r.stop:
			r.done <- r.drain(bound)
			return
		case now := <-tick.C:
			if now.Before(next) {
				continue
			}
		}
		err := r.catchUp(context.Background())
		if err == nil {
			wait, next = 0, time.Now()
			continue
		}
		if errors.Is(err, ErrTaken) {
			<-r.stop // fenced: nothing more to ship
			r.done <- err
			return
		}
		wait = min(max(2*wait, time.Second), maxBackoff)
		next = time.Now().Add(wait)
	}
}

// catchUp ships until nothing is left, and notes how it went.
func (r *Replicator) catchUp(ctx context.Context) error {
	if !r.scrubbed {
		err := r.scrub(ctx)
		r.note(err)
		if err != nil {
			return err
		}
	}
	for {
		more, err := r.shipOnce(ctx)
		r.note(err)
		if err != nil || !more {
			return err
		}
	}
}

// note records the outcome of a try in the status, and says when the
// remote fails or comes back.
func (r *Replicator) note(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status.ShippedSeq, r.status.Segments = r.seq, r.n
	switch {
	case err == nil && r.status.Error != "":
		r.opts.Logger.Info("remote reachable again", "remote", r.status.Remote, "down_since", r.status.ErrorSince)
		r.status.Error, r.status.ErrorSince = "", time.Time{}
	case err != nil:
		switch {
		case errors.Is(err, ErrTaken):
			r.opts.Logger.Error("replication stopped: another dshfs took the remote over", "remote", r.status.Remote, "err", err)
		case r.status.Error == "":
			r.opts.Logger.Warn("remote unreachable, history queued on local disk", "remote", r.status.Remote, "err", err)
		}
		if r.status.Error == "" {
			r.status.ErrorSince = time.Now()
		}
		r.status.Error = err.Error()
		r.status.Fenced = errors.Is(err, ErrTaken)
	}
}

// drain ships what is left within bound.
func (r *Replicator) drain(bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	r.trees.due = true // the workspace as it is left
	r.draining = true
	for {
		err := r.catchUp(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrTaken) || ctx.Err() != nil {
			return r.remains(err)
		}
		select {
		case <-ctx.Done():
			return r.remains(err)
		case <-time.After(time.Second):
		}
	}
}

// remains says how much of the journal was not shipped.
func (r *Replicator) remains(err error) error {
	last, lerr := r.store.JournalSeq()
	if lerr != nil {
		return fmt.Errorf("drain history to %s: %w", r.b.Location(), err)
	}
	return fmt.Errorf("drain history to %s: journal entries %d to %d not shipped: %w", r.b.Location(), r.seq+1, last, err)
}

// Close ships what is left, for at most bound, and stops. Its error says
// what was not shipped.
func (r *Replicator) Close(bound time.Duration) error {
	r.stop <- bound
	return <-r.done
}
