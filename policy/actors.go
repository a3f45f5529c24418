package policy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// MaxActorBytes bounds an actor's name. Observations are keyed by actor
// and path, and bbolt refuses keys over 32 KiB; a name this short keeps
// every key well under that, whatever the path.
const MaxActorBytes = 256

// ErrActorTooLong is returned for an actor name over MaxActorBytes.
var ErrActorTooLong = errors.New("actor name too long")

// ErrActorNUL refuses an actor name with a NUL byte in it.
var ErrActorNUL = errors.New("actor contains a NUL byte")

// stampInterval is how stale an actor's activity stamp may grow before an
// observation that changes nothing moves it: reads that only repeat what
// the actor saw stay read-only transactions.
const stampInterval = time.Hour

// Activity is when an actor last recorded an observation.
type Activity struct {
	Actor    string    `json:"actor"`
	LastSeen time.Time `json:"last_seen"`
}

func stamp(b *bolt.Bucket, actor string, t time.Time) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(t.UnixNano()))
	return b.Put([]byte(actor), v[:])
}

func unstamp(v []byte) (time.Time, bool) {
	if len(v) != 8 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))), true
}

// stampAll stamps every actor holding an observation with t.
func stampAll(obs, actors *bolt.Bucket, t time.Time) error {
	var last []byte
	return obs.ForEach(func(k, _ []byte) error {
		a, _, _ := bytes.Cut(k, []byte{0})
		if bytes.Equal(a, last) {
			return nil
		}
		last = append(last[:0], a...)
		return stamp(actors, string(a), t)
	})
}

// Activity lists every actor with its last activity, most recent first.
func (p *Policy) Activity() ([]Activity, error) {
	var out []Activity
	err := p.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketActors).ForEach(func(k, v []byte) error {
			t, _ := unstamp(v)
			out = append(out, Activity{Actor: string(k), LastSeen: t})
			return nil
		})
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastSeen.After(out[j].LastSeen) })
	return out, err
}

// ForgetIdle forgets the observations of every actor idle for longer than
// idle, and of the least recently active beyond the keep most recent ones
// (keep 0: no cap). A forgotten actor must read again before it edits, and
// its writes only create: the safe direction. It returns the actors
// forgotten.
func (p *Policy) ForgetIdle(idle time.Duration, keep int) ([]string, error) {
	all, err := p.Activity()
	if err != nil {
		return nil, err
	}
	cutoff := p.now().Add(-idle)
	var idlers []Activity
	for i, a := range all {
		if a.LastSeen.Before(cutoff) || keep > 0 && i >= keep {
			idlers = append(idlers, a)
		}
	}
	var gone []string
	// In batches: one actor may hold many observations, and a single huge
	// transaction would hold the index's write lock for long.
	for start := 0; start < len(idlers); start += 64 {
		batch := idlers[start:min(start+64, len(idlers))]
		err := p.db.Update(func(tx *bolt.Tx) error {
			for _, a := range batch {
				// One that observed since the list was taken stays.
				if t, _ := unstamp(tx.Bucket(bucketActors).Get([]byte(a.Actor))); t.After(a.LastSeen) {
					continue
				}
				if err := forget(tx, a.Actor); err != nil {
					return err
				}
				gone = append(gone, a.Actor)
			}
			return nil
		})
		if err != nil {
			return gone, err
		}
	}
	return gone, nil
}
