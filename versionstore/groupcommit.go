package versionstore

import (
	"fmt"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// Every index commit is durable before it returns: bbolt writes the pages,
// fdatasyncs, writes the meta page and fdatasyncs again (NoSync is off, see
// openIndex). That costs about a millisecond, so the commits of concurrent
// callers share one transaction and its two syncs: the group committer.
//
// It has no timer (bbolt's Batch waits 10 ms for a lone writer). A caller
// queues its function and takes the commit slot; whoever holds the slot
// commits everything queued at that moment in one transaction. Callers that
// arrive while a commit is syncing queue behind it and ride the next one
// together, so a lone writer pays one commit and a crowd pays one commit per
// round, not one each.

// groupCommitter batches index updates into shared durable transactions.
type groupCommitter struct {
	db    *bolt.DB
	slot  chan struct{} // held while a transaction runs
	queue chan []*commitCall
	// done counts the transactions committed, for Stats.
	done atomic.Uint64
}

type commitCall struct {
	fn   func(*bolt.Tx) error
	done chan error
}

func newGroupCommitter(db *bolt.DB) *groupCommitter {
	g := &groupCommitter{db: db, slot: make(chan struct{}, 1), queue: make(chan []*commitCall, 1)}
	g.queue <- nil
	return g
}

// update runs fn in a durable read-write transaction, possibly shared with
// other callers' functions, and returns fn's error or the commit's. fn may
// run more than once (when another function in its transaction fails, the
// rest are retried without it), so it must compute everything from tx.
func (g *groupCommitter) update(fn func(*bolt.Tx) error) error {
	c := &commitCall{fn: fn, done: make(chan error, 1)}
	q := <-g.queue
	g.queue <- append(q, c)
	select {
	case err := <-c.done:
		return err // a commit that started after we queued carried it
	case g.slot <- struct{}{}:
	}
	batch := <-g.queue
	g.queue <- nil
	g.run(batch)
	<-g.slot
	// Our call was either in this batch or in one that finished before
	// we got the slot: its result is there.
	return <-c.done
}

// run commits batch. A function that fails rolls the transaction back; it
// is answered with its own error from a transaction of its own, and the
// others are committed without it.
func (g *groupCommitter) run(batch []*commitCall) {
	for len(batch) > 0 {
		failed := -1
		err := g.db.Update(func(tx *bolt.Tx) error {
			for i, c := range batch {
				if err := safeCall(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if err == nil {
			g.done.Add(1)
		}
		if failed < 0 {
			for _, c := range batch {
				c.done <- err
			}
			return
		}
		solo := batch[failed]
		if len(batch) == 1 {
			solo.done <- err
			return
		}
		solo.done <- g.db.Update(func(tx *bolt.Tx) error { return safeCall(solo.fn, tx) })
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
}

// safeCall runs fn, turning a panic (bbolt raises them on damaged pages)
// into an error for its caller alone.
func safeCall(fn func(*bolt.Tx) error, tx *bolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("index update: %v", r)
		}
	}()
	return fn(tx)
}
