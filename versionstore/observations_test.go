package versionstore

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The kept index's observations and actors' stamps, as the policy reads
// them.
func TestKeptIndexObservations(t *testing.T) {
	ts := openKeptIndex(t)
	want, err := os.ReadFile(keptIndex + ".golden")
	must(t, err)
	obs := ts.Observations()
	acts, err := obs.Activity()
	must(t, err)
	var got []string
	for _, a := range acts {
		got = append(got, fmt.Sprintf("actor %q %s", a.Actor, a.LastSeen.UTC().Format(time.RFC3339Nano)))
	}
	for _, l := range strings.Split(string(want), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "observation" {
			actor, _ := strconv.Unquote(f[1])
			key, _ := strconv.Unquote(f[2])
			o, found, err := obs.Lookup(actor, key)
			if err != nil || !found {
				t.Errorf("%s: found %v, %v", l, found, err)
			}
			got = append(got, fmt.Sprintf("observation %q %q %s", actor, key, hex.EncodeToString(encodeObserved(o))))
		}
	}
	compareDump(t, strings.Join(got, "\n"), grepLines(string(want), "actor ", "observation "))
}

func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

// An index written before actors were stamped stamps its actors when it
// is opened: their idle time starts then.
func TestActorsOfAnOlderIndexAreStampedAtOpen(t *testing.T) {
	ts := openTestStore(t)
	obs := ts.Observations()
	long := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, obs.Record("a", "x.txt", Observed{Present: true, Version: SumString("x")}, long))
	must(t, obs.Record("a", "y.txt", Observed{}, long))
	must(t, obs.Record("b", "x.txt", Observed{}, long))
	must(t, ts.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketActors) }))
	before := time.Now()
	ts.reopen()
	acts, err := ts.Observations().Activity()
	must(t, err)
	if len(acts) != 2 {
		t.Fatalf("Activity() = %v; want a and b", acts)
	}
	for _, a := range acts {
		if a.LastSeen.Before(before) || a.LastSeen.After(time.Now()) {
			t.Errorf("%s stamped %v, want the open's time", a.Actor, a.LastSeen)
		}
	}
}

// An actor with a NUL in it would make its observations another's.
func TestObservationRefusesNULActor(t *testing.T) {
	ts := openTestStore(t)
	err := ts.Observations().Record("a\x00b", "x", Observed{}, time.Now())
	if !errors.Is(err, errActorNUL) {
		t.Fatalf("Record = %v", err)
	}
	actors, err := ts.Observations().Actors()
	must(t, err)
	if len(actors) != 0 {
		t.Fatalf("actors %q", actors)
	}
}
