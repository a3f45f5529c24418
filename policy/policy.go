// Package policy owns what each actor has observed of the workspace, and the
// read-before-write decisions made from it: a write replaces only the version
// its actor last saw (or creates a file the actor never saw), and an edit
// requires a prior observation. It ports the observation policy of the
// reference implementation (docs/reference.md: the TypeScript stack whose
// model-facing behaviour dshfs matches), except that observations are
// persisted in the index's bbolt file, keyed by the actor string, so they
// survive reconnects and restarts.
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
	bolt "go.etcd.io/bbolt"
)

// The buckets, and their keys' encodings.
var (
	// bucketObservations maps actor 0x00 key → observation. An actor string
	// never contains NUL (Observe refuses it), so the prefix scan is exact.
	bucketObservations = []byte("observations")
	// bucketActors maps actor → when it last recorded an observation
	// (8 bytes, big-endian Unix nanoseconds), so idle actors can be
	// forgotten.
	bucketActors = []byte("actors")
)

// absentMark is the stored form of an absent observation; a present one is
// the 32 version bytes.
var absentMark = []byte{0}

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
	db  *bolt.DB
	now func() time.Time
}

// Options configure a Policy. The zero value is usable.
type Options struct {
	// Now is the clock actors' activity is stamped with (default time.Now).
	Now func() time.Time
}

// New returns the policy stored in db, creating its buckets if needed.
func New(db *bolt.DB, opts Options) (*Policy, error) {
	p := &Policy{db: db, now: opts.Now}
	if p.now == nil {
		p.now = time.Now
	}
	err := db.Update(func(tx *bolt.Tx) error {
		obs, err := tx.CreateBucketIfNotExists(bucketObservations)
		if err != nil {
			return err
		}
		if tx.Bucket(bucketActors) != nil {
			return nil
		}
		actors, err := tx.CreateBucket(bucketActors)
		if err != nil {
			return err
		}
		// An index from before actors were stamped: its actors start
		// their idle time now.
		return stampAll(obs, actors, p.now())
	})
	if err != nil {
		return nil, fmt.Errorf("open observations: %w", err)
	}
	return p, nil
}

func obsKey(actor, key string) []byte {
	k := make([]byte, 0, len(actor)+1+len(key))
	k = append(append(append(k, actor...), 0), key...)
	return k
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
	return p.db.Update(func(tx *bolt.Tx) error { return put(tx, actor, key, o, now) })
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
	return func(tx *bolt.Tx, v versionstore.Version) error {
		return put(tx, actor, key, Present(v), p.now())
	}
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

// put records in tx that actor saw key in state o at now.
func put(tx *bolt.Tx, actor, key string, o Observation, now time.Time) error {
	val := absentMark
	if o.Present {
		val = o.Version[:]
	}
	if err := tx.Bucket(bucketObservations).Put(obsKey(actor, key), val); err != nil {
		return err
	}
	return stamp(tx.Bucket(bucketActors), actor, now)
}

// unchanged reports whether actor already holds observation o of key and
// was stamped active recently enough that the stamp need not move. One
// read-only transaction: a read repeating what its actor saw costs no more.
// An observation that does not decode is not the same: the commit that
// follows replaces it.
func (p *Policy) unchanged(actor, key string, o Observation, now time.Time) (same bool, err error) {
	err = p.db.View(func(tx *bolt.Tx) error {
		prev, found := decodeObservation(tx.Bucket(bucketObservations).Get(obsKey(actor, key)))
		last, ok := unstamp(tx.Bucket(bucketActors).Get([]byte(actor)))
		same = found && prev == o && ok && now.Sub(last) < stampInterval
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("read observation of %q by %q: %w", key, actor, err)
	}
	return same, nil
}

// decodeObservation reads a stored observation (found: there is one, and it
// decodes).
func decodeObservation(v []byte) (o Observation, found bool) {
	switch {
	case len(v) == len(o.Version):
		o.Present = true
		copy(o.Version[:], v)
		return o, true
	case bytes.Equal(v, absentMark):
		return o, true
	}
	return o, false
}

// Lookup returns actor's observation of key, and whether there is one.
func (p *Policy) Lookup(actor, key string) (Observation, bool, error) {
	var o Observation
	var found bool
	if actor == "" {
		return o, false, nil
	}
	err := p.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketObservations).Get(obsKey(actor, key))
		switch {
		case v == nil:
		case len(v) == len(o.Version):
			found, o.Present = true, true
			copy(o.Version[:], v)
		case bytes.Equal(v, absentMark):
			found = true
		default:
			return fmt.Errorf("decode observation of %q by %q", key, actor)
		}
		return nil
	})
	return o, found, err
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
func (p *Policy) Forget(actor string) error {
	return p.db.Update(func(tx *bolt.Tx) error { return forget(tx, actor) })
}

// forget drops actor's observations and its activity stamp.
func forget(tx *bolt.Tx, actor string) error {
	prefix := append([]byte(actor), 0)
	c := tx.Bucket(bucketObservations).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketActors).Delete([]byte(actor))
}

// Actors lists the actors with at least one observation.
func (p *Policy) Actors() ([]string, error) {
	var out []string
	err := p.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketObservations).ForEach(func(k, _ []byte) error {
			a, _, _ := bytes.Cut(k, []byte{0})
			if len(out) == 0 || out[len(out)-1] != string(a) {
				out = append(out, string(a))
			}
			return nil
		})
	})
	return out, err
}
