package policy

import (
	"errors"
	"sort"
	"time"

	"github.com/dshfs/dshfs/versionstore"
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

// Activity lists every actor with its last activity, most recent first.
func (p *Policy) Activity() ([]Activity, error) {
	acts, err := p.obs.Activity()
	out := make([]Activity, 0, len(acts))
	for _, a := range acts {
		out = append(out, Activity(a))
	}
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
	var idlers []versionstore.ActorActivity
	for i, a := range all {
		if a.LastSeen.Before(cutoff) || keep > 0 && i >= keep {
			idlers = append(idlers, versionstore.ActorActivity(a))
		}
	}
	var gone []string
	// In batches: one actor may hold many observations, and a single huge
	// transaction would hold the index's write lock for long. One that
	// observed since the list was taken stays.
	for start := 0; start < len(idlers); start += 64 {
		batch, err := p.obs.ForgetInactive(idlers[start:min(start+64, len(idlers))])
		gone = append(gone, batch...)
		if err != nil {
			return gone, err
		}
	}
	return gone, nil
}
