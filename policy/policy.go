// Package policy owns what each actor has observed of the workspace, and the
// read-before-write decisions made from it: a write replaces only the version
// its actor last saw (or creates a file the actor never saw), and an edit
// requires a prior observation. It ports the observation policy of the
// reference implementation (docs/reference.md: the TypeScript stack whose
// model-facing behaviour dshfs matches), except that observations are
// persisted, keyed by the actor string, so they survive reconnects and
// restarts: the store keeps them in its index (versionstore.Observations),
// which the policy never touches itself.
//
// The policy decides; it never reads or writes files. Freshness is enforced
// by versionstore's compare-and-swap, not here. A refusal is a
// *RefusalError, data that toolapi words: the policy never writes text
// for the model.
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// Observation is what an actor last saw of a path.
type Observation struct {
	Present bool
	Version versionstore.Version // for a present observation
}

// Absent is the observation of a missing file.
var Absent = Observation{}

// Present is the observation of a file at version v.
func Present(v versionstore.Version) Observation { return Observation{Present: true, Version: v} }

// Policy is the persistent observed state of every actor.
type Policy struct {
	obs *versionstore.Observations
	now func() time.Time
}

// Options configure a Policy. The zero value is usable.
type Options struct {
	// Now is the clock actors' activity is stamped with (default time.Now).
	Now func() time.Time
}

// New returns the policy whose observations obs keeps (a store's
// Observations).
func New(obs *versionstore.Observations, opts Options) (*Policy, error) {
	p := &Policy{obs: obs, now: opts.Now}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// Observe records that actor saw key in state o. An empty actor is the
// reference implementation's "no owner": nothing is recorded.
func (p *Policy) Observe(actor, key string, o Observation) error {
	if actor == "" {
		return nil
	}
	if err := checkActor(actor); err != nil {
		return err
	}
	now := p.now()
	if same, err := p.unchanged(actor, key, o, now); err != nil || same {
		return err // a read-only transaction is much cheaper than a commit
	}
	return p.obs.Record(actor, key, versionstore.Observed(o), now)
}

// Observing is the observation of a tool write by actor of key, made in
// the store's transaction that records the version written (it is nil when
// Observe would record nothing, or fail): one durable commit for both. The
// caller still calls Observe afterwards, which then finds the observation
// recorded in a read-only transaction, or records it if this failed.
func (p *Policy) Observing(actor, key string) versionstore.AlsoCommit {
	if actor == "" || checkActor(actor) != nil {
		return nil
	}
	return p.obs.Recording(actor, key, p.now)
}

func checkActor(actor string) error {
	if bytes.IndexByte([]byte(actor), 0) >= 0 {
		return fmt.Errorf("record observation: %w", ErrActorNUL)
	}
	if len(actor) > MaxActorBytes {
		return fmt.Errorf("record observation: %w", ErrActorTooLong)
	}
	return nil
}

// unchanged reports whether actor already holds observation o of key and
// was stamped active recently enough that the stamp need not move. One
// read-only transaction: a read repeating what its actor saw costs no more.
// An observation that does not decode is not the same: the commit that
// follows replaces it.
func (p *Policy) unchanged(actor, key string, o Observation, now time.Time) (same bool, err error) {
	st, err := p.obs.State(actor, key)
	if err != nil {
		return false, fmt.Errorf("read observation of %q by %q: %w", key, actor, err)
	}
	return st.Found && Observation(st.Observed) == o && st.Stamped && now.Sub(st.LastSeen) < stampInterval, nil
}

// Lookup returns actor's observation of key, and whether there is one.
func (p *Policy) Lookup(actor, key string) (Observation, bool, error) {
	if actor == "" {
		return Observation{}, false, nil
	}
	o, found, err := p.obs.Lookup(actor, key)
	return Observation(o), found, err
}

// WriteIntent is the guard for actor writing key: replace only the observed
// version if the actor saw the file, otherwise create only. It never fails
// for policy reasons.
func (p *Policy) WriteIntent(actor, key string) (versionstore.Intent, error) {
	o, found, err := p.Lookup(actor, key)
	if err != nil {
		return versionstore.Intent{}, err
	}
	if found && o.Present {
		return versionstore.Intent{Kind: versionstore.IntentReplaceIfVersion, Version: o.Version}, nil
	}
	return versionstore.Intent{Kind: versionstore.IntentCreateIfAbsent}, nil
}

// The reasons EditIntent refuses an edit, wrapped by a *RefusalError.
var (
	// ErrNotObserved: the actor never saw the file (or there is no actor).
	ErrNotObserved = errors.New("not observed")
	// ErrObservedAbsent: the actor last saw no file there.
	ErrObservedAbsent = errors.New("observed absent")
)

// RefusalError is a policy decision against actor acting on key. It is
// data: toolapi says it to the model.
type RefusalError struct {
	Actor, Key string
	Err        error // ErrNotObserved or ErrObservedAbsent
}

func (e *RefusalError) Error() string {
	return "policy: " + strconv.Quote(e.Actor) + " on " + strconv.Quote(e.Key) + ": " + e.Err.Error()
}

func (e *RefusalError) Unwrap() error { return e.Err }

// EditIntent is the version actor may edit key at, or a *RefusalError:
// ErrNotObserved if the actor never saw it (or there is no actor),
// ErrObservedAbsent if it last saw it absent.
func (p *Policy) EditIntent(actor, key string) (versionstore.Version, error) {
	o, found, err := p.Lookup(actor, key)
	switch {
	case err != nil:
		return versionstore.Version{}, err
	case !found:
		return versionstore.Version{}, &RefusalError{Actor: actor, Key: key, Err: ErrNotObserved}
	case !o.Present:
		return versionstore.Version{}, &RefusalError{Actor: actor, Key: key, Err: ErrObservedAbsent}
	}
	return o.Version, nil
}

// Forget drops every observation of actor.
func (p *Policy) Forget(actor string) error { return p.obs.Forget(actor) }

// Actors lists the actors with at least one observation.
func (p *Policy) Actors() ([]string, error) { return p.obs.Actors() }
