package versionstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The store keeps, in its index, what each actor last saw of each path
// and when each actor last recorded anything, so that they survive
// reconnects and restarts (the observations and actors buckets,
// buckets.go). It only keeps them: the policy decides what an actor may do
// from them.

// absentMark is the stored form of an observation of no file.
var absentMark = []byte{0}

// errActorNUL refuses an actor whose name would break the key encoding.
var errActorNUL = errors.New("actor contains a NUL byte")

// Observed is what an actor saw of a path: a file at Version, or none.
type Observed struct {
	Present bool
	Version Version // of a present file
}

// ActorActivity is when an actor last recorded an observation.
type ActorActivity struct {
	Actor    string
	LastSeen time.Time
}

// ObservationState is an actor's observation of a path and its activity
// stamp, read together.
type ObservationState struct {
	Observed Observed
	Found    bool // there is an observation, and it decodes
	LastSeen time.Time
	Stamped  bool // the actor has an activity stamp
}

// Observations is the store's record of the actors' observations.
type Observations struct{ db *bolt.DB }

// Observations returns the store's record of what each actor saw.
func (s *Store) Observations() *Observations { return &Observations{db: s.db} }

func encodeObserved(o Observed) []byte {
	if !o.Present {
		return absentMark
	}
	return o.Version[:]
}

// decodeObserved reads a stored observation (ok: it decodes).
func decodeObserved(v []byte) (o Observed, ok bool) {
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

func encodeStamp(t time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano())) }

func decodeStamp(v []byte) (time.Time, bool) {
	if len(v) != 8 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))), true
}

// Lookup returns actor's observation of key, and whether there is one. One
// that does not decode is an error.
func (o *Observations) Lookup(actor, key string) (obs Observed, found bool, err error) {
	err = o.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketObservations).Get(observationKey(actor, key))
		if v == nil {
			return nil
		}
		if obs, found = decodeObserved(v); !found {
			return fmt.Errorf("decode observation of %q by %q", key, actor)
		}
		return nil
	})
	return obs, found, err
}

// State reads actor's observation of key and its activity stamp in one
// read-only transaction.
func (o *Observations) State(actor, key string) (st ObservationState, err error) {
	err = o.db.View(func(tx *bolt.Tx) error {
		st.Observed, st.Found = decodeObserved(tx.Bucket(bucketObservations).Get(observationKey(actor, key)))
		st.LastSeen, st.Stamped = decodeStamp(tx.Bucket(bucketActors).Get([]byte(actor)))
		return nil
	})
	return st, err
}

// Record records that actor saw key as obs, and stamps it active at now.
func (o *Observations) Record(actor, key string, obs Observed, now time.Time) error {
	return o.db.Update(func(tx *bolt.Tx) error { return recordObservation(tx, actor, key, obs, now) })
}

// Recording is Record of the version written, in the store's transaction
// that records it (an AlsoCommit): one durable commit for both.
func (o *Observations) Recording(actor, key string, now func() time.Time) AlsoCommit {
	return func(tx *bolt.Tx, v Version) error {
		return recordObservation(tx, actor, key, Observed{Present: true, Version: v}, now())
	}
}

func recordObservation(tx *bolt.Tx, actor, key string, obs Observed, now time.Time) error {
	if bytes.IndexByte([]byte(actor), 0) >= 0 {
		return fmt.Errorf("record observation: %w", errActorNUL)
	}
	if err := tx.Bucket(bucketObservations).Put(observationKey(actor, key), encodeObserved(obs)); err != nil {
		return err
	}
	return tx.Bucket(bucketActors).Put([]byte(actor), encodeStamp(now))
}

// Forget drops every observation of actor, and its stamp.
func (o *Observations) Forget(actor string) error {
	return o.db.Update(func(tx *bolt.Tx) error { return forgetActor(tx, actor) })
}

func forgetActor(tx *bolt.Tx, actor string) error {
	prefix := append([]byte(actor), 0)
	c := tx.Bucket(bucketObservations).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketActors).Delete([]byte(actor))
}

// ForgetInactive forgets, in one transaction, each of actors that has not
// recorded anything since the LastSeen given (one that has stays). It
// returns those forgotten.
func (o *Observations) ForgetInactive(actors []ActorActivity) (gone []string, err error) {
	err = o.db.Update(func(tx *bolt.Tx) error {
		gone = gone[:0]
		for _, a := range actors {
			if t, _ := decodeStamp(tx.Bucket(bucketActors).Get([]byte(a.Actor))); t.After(a.LastSeen) {
				continue
			}
			if err := forgetActor(tx, a.Actor); err != nil {
				return err
			}
			gone = append(gone, a.Actor)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return gone, nil
}

// Actors lists the actors with at least one observation, in key order.
func (o *Observations) Actors() ([]string, error) {
	var out []string
	err := o.db.View(func(tx *bolt.Tx) error {
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

// Activity lists every stamped actor with its stamp, in key order.
func (o *Observations) Activity() ([]ActorActivity, error) {
	var out []ActorActivity
	err := o.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketActors).ForEach(func(k, v []byte) error {
			t, _ := decodeStamp(v)
			out = append(out, ActorActivity{Actor: string(k), LastSeen: t})
			return nil
		})
	})
	return out, err
}

// stampActors gives every actor holding an observation the stamp t: at
// the open of an index written before actors were stamped, whose actors
// then start their idle time.
func stampActors(tx *bolt.Tx, t time.Time) error {
	actors := tx.Bucket(bucketActors)
	var last []byte
	return tx.Bucket(bucketObservations).ForEach(func(k, _ []byte) error {
		a, _, _ := bytes.Cut(k, []byte{0})
		if bytes.Equal(a, last) {
			return nil
		}
		last = append(last[:0], a...)
		return actors.Put(a, encodeStamp(t))
	})
}
