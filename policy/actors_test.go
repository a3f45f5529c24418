package policy

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newClockedPolicy(t *testing.T) (*Policy, *clock) {
	t.Helper()
	st, err := versionstore.Open(t.TempDir(), filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p, err := New(st.Observations(), Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

func actorsOf(t *testing.T, p *Policy) []string {
	t.Helper()
	acts, err := p.Activity()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range acts {
		out = append(out, a.Actor)
	}
	return out
}

func TestForgetIdleForgetsOnlyIdleActors(t *testing.T) {
	p, c := newClockedPolicy(t)
	mustObserve(t, p, "old", "x.txt", Present(v1))
	c.advance(5 * 24 * time.Hour)
	mustObserve(t, p, "new", "x.txt", Present(v2))
	c.advance(3 * 24 * time.Hour) // old: 8 days idle, new: 3

	gone, err := p.ForgetIdle(7*24*time.Hour, 0)
	if err != nil || !reflect.DeepEqual(gone, []string{"old"}) {
		t.Fatalf("ForgetIdle = %q, %v; want [old]", gone, err)
	}
	mustEditRefused(t, p, "old", "x.txt", ErrNotObserved)
	mustWriteIntent(t, p, "old", "x.txt", createIfAbsent)
	mustEditVersion(t, p, "new", "x.txt", v2)
	if got := actorsOf(t, p); !reflect.DeepEqual(got, []string{"new"}) {
		t.Fatalf("actors after ForgetIdle = %q, want [new]", got)
	}
}

func TestForgetIdleKeepsTheMostRecent(t *testing.T) {
	p, c := newClockedPolicy(t)
	for _, a := range []string{"a", "b", "c", "d"} {
		mustObserve(t, p, a, "x.txt", Present(v1))
		c.advance(time.Minute)
	}
	gone, err := p.ForgetIdle(24*time.Hour, 2)
	if err != nil || !reflect.DeepEqual(gone, []string{"b", "a"}) {
		t.Fatalf("ForgetIdle(keep 2) = %q, %v; want [b a]", gone, err)
	}
	if got := actorsOf(t, p); !reflect.DeepEqual(got, []string{"d", "c"}) {
		t.Fatalf("actors = %q, want [d c], most recent first", got)
	}
}

func TestRepeatedObservationKeepsAnActorActive(t *testing.T) {
	p, c := newClockedPolicy(t)
	mustObserve(t, p, "a", "x.txt", Present(v1))
	// Reads of an unchanged file for ten days, one a day.
	for range 10 {
		c.advance(24 * time.Hour)
		mustObserve(t, p, "a", "x.txt", Present(v1))
	}
	if gone, err := p.ForgetIdle(7*24*time.Hour, 0); err != nil || len(gone) != 0 {
		t.Fatalf("ForgetIdle = %q, %v; an actor reading every day is not idle", gone, err)
	}
	mustEditVersion(t, p, "a", "x.txt", v1)
}

func TestObserveRefusesALongActor(t *testing.T) {
	p := newPolicy(t)
	err := p.Observe(strings.Repeat("x", MaxActorBytes+1), "x.txt", Present(v1))
	if !errors.Is(err, ErrActorTooLong) {
		t.Fatalf("Observe(long actor) = %v, want ErrActorTooLong", err)
	}
	mustObserve(t, p, strings.Repeat("x", MaxActorBytes), "x.txt", Present(v1))
}
