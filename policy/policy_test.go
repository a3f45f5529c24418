package policy

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/dshfs/dshfs/versionstore"
)

// openPolicy opens a real store (and so a real bbolt file) at indexPath over
// a fresh workspace, and the policy in it. Both close in t.Cleanup; the
// returned func closes them early, for reopen tests.
func openPolicy(t *testing.T, indexPath string) (*Policy, func()) {
	t.Helper()
	st, err := versionstore.Open(t.TempDir(), indexPath, versionstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	closeStore := func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	}
	t.Cleanup(closeStore) // Close is idempotent
	p, err := New(st.Observations(), Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, closeStore
}

func newPolicy(t *testing.T) *Policy {
	t.Helper()
	p, _ := openPolicy(t, filepath.Join(t.TempDir(), "index.db"))
	return p
}

var (
	v1 = versionstore.SumString("one\n")
	v2 = versionstore.SumString("two\n")
)

func mustObserve(t *testing.T, p *Policy, actor, key string, o Observation) {
	t.Helper()
	if err := p.Observe(actor, key, o); err != nil {
		t.Fatalf("Observe(%q, %q): %v", actor, key, err)
	}
}

func mustWriteIntent(t *testing.T, p *Policy, actor, key string, want versionstore.Intent) {
	t.Helper()
	got, err := p.WriteIntent(actor, key)
	if err != nil {
		t.Fatalf("WriteIntent(%q, %q): %v", actor, key, err)
	}
	if got != want {
		t.Fatalf("WriteIntent(%q, %q) = %+v, want %+v", actor, key, got, want)
	}
}

// mustEditVersion fails unless the edit intent is the version want.
func mustEditVersion(t *testing.T, p *Policy, actor, key string, want versionstore.Version) {
	t.Helper()
	got, err := p.EditIntent(actor, key)
	if err != nil {
		t.Fatalf("EditIntent(%q, %q): %v", actor, key, err)
	}
	if got != want {
		t.Fatalf("EditIntent(%q, %q) = %s, want %s", actor, key, got, want)
	}
}

// mustEditRefused fails unless the edit intent is a *RefusalError of
// actor on key for reason want.
func mustEditRefused(t *testing.T, p *Policy, actor, key string, want error) {
	t.Helper()
	v, err := p.EditIntent(actor, key)
	var re *RefusalError
	if !errors.As(err, &re) {
		t.Fatalf("EditIntent(%q, %q) = %s, %v; want *RefusalError %v", actor, key, v, err, want)
	}
	if re.Actor != actor || re.Key != key || !errors.Is(err, want) {
		t.Fatalf("EditIntent(%q, %q) error = %+v, want %q %q %v", actor, key, re, actor, key, want)
	}
	if !v.IsZero() {
		t.Fatalf("refused EditIntent returned version %s", v)
	}
}

var (
	createIfAbsent = versionstore.Intent{Kind: versionstore.IntentCreateIfAbsent}
)

func replaceIf(v versionstore.Version) versionstore.Intent {
	return versionstore.Intent{Kind: versionstore.IntentReplaceIfVersion, Version: v}
}

func TestWriteIntent(t *testing.T) {
	tests := []struct {
		name    string
		observe func(p *Policy)
		actor   string
		want    versionstore.Intent
	}{
		{"unseen", func(*Policy) {}, "a", createIfAbsent},
		{"no owner", func(*Policy) {}, "", createIfAbsent},
		{"no owner, after a no-owner observation", func(p *Policy) { _ = p.Observe("", "a.txt", Present(v1)) }, "", createIfAbsent},
		{"no owner, though another actor saw it", func(p *Policy) { _ = p.Observe("b", "a.txt", Present(v1)) }, "", createIfAbsent},
		{"absent", func(p *Policy) { _ = p.Observe("a", "a.txt", Absent) }, "a", createIfAbsent},
		{"present", func(p *Policy) { _ = p.Observe("a", "a.txt", Present(v1)) }, "a", replaceIf(v1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy(t)
			tc.observe(p)
			mustWriteIntent(t, p, tc.actor, "a.txt", tc.want)
		})
	}
}

func TestEditIntent(t *testing.T) {
	tests := []struct {
		name    string
		observe func(p *Policy)
		actor   string
		want    error // nil means success at v1
	}{
		{"unseen", func(*Policy) {}, "a", ErrNotObserved},
		{"no owner", func(*Policy) {}, "", ErrNotObserved},
		{"no owner, after a no-owner observation", func(p *Policy) { _ = p.Observe("", "a.txt", Present(v1)) }, "", ErrNotObserved},
		{"no owner, though another actor saw it", func(p *Policy) { _ = p.Observe("b", "a.txt", Present(v1)) }, "", ErrNotObserved},
		{"seen by another actor only", func(p *Policy) { _ = p.Observe("b", "a.txt", Present(v1)) }, "a", ErrNotObserved},
		{"absent", func(p *Policy) { _ = p.Observe("a", "a.txt", Absent) }, "a", ErrObservedAbsent},
		{"present", func(p *Policy) { _ = p.Observe("a", "a.txt", Present(v1)) }, "a", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy(t)
			tc.observe(p)
			if tc.want == nil {
				mustEditVersion(t, p, tc.actor, "a.txt", v1)
				return
			}
			mustEditRefused(t, p, tc.actor, "a.txt", tc.want)
		})
	}
}

// A refusal is data: the policy knows keys, never display paths or the
// words the model reads (toolapi has both).
func TestEditIntentRefusalIsTyped(t *testing.T) {
	p := newPolicy(t)
	_, err := p.EditIntent("a", "dir/real.txt")
	var re *RefusalError
	if !errors.As(err, &re) || re.Key != "dir/real.txt" || re.Actor != "a" || !errors.Is(err, ErrNotObserved) {
		t.Fatalf("error = %#v, want a *RefusalError of a on dir/real.txt, ErrNotObserved", err)
	}
}

func TestObservationsRefreshBasis(t *testing.T) {
	p := newPolicy(t)
	mustObserve(t, p, "a", "a.txt", Present(v1))
	mustObserve(t, p, "a", "a.txt", Present(v2))
	mustWriteIntent(t, p, "a", "a.txt", replaceIf(v2))
	mustEditVersion(t, p, "a", "a.txt", v2)
}

func TestNoOwnerObservationRecordsNothing(t *testing.T) {
	p := newPolicy(t)
	mustObserve(t, p, "", "a.txt", Present(v1))
	mustObserve(t, p, "", "b.txt", Absent)
	if _, found, err := p.Lookup("", "a.txt"); err != nil || found {
		t.Fatalf("Lookup(no owner) = found %v, err %v; want nothing", found, err)
	}
	actors, err := p.Actors()
	if err != nil || len(actors) != 0 {
		t.Fatalf("Actors() = %q, %v; want none", actors, err)
	}
	// Nothing leaked to a real actor either.
	mustWriteIntent(t, p, "a", "a.txt", createIfAbsent)
	mustEditRefused(t, p, "a", "b.txt", ErrNotObserved)
}

func TestPresentAbsentPresent(t *testing.T) {
	p := newPolicy(t)
	mustObserve(t, p, "a", "a.txt", Present(v1))
	mustWriteIntent(t, p, "a", "a.txt", replaceIf(v1))
	mustEditVersion(t, p, "a", "a.txt", v1)

	mustObserve(t, p, "a", "a.txt", Absent)
	mustWriteIntent(t, p, "a", "a.txt", createIfAbsent)
	mustEditRefused(t, p, "a", "a.txt", ErrObservedAbsent)

	mustObserve(t, p, "a", "a.txt", Present(v2))
	mustWriteIntent(t, p, "a", "a.txt", replaceIf(v2))
	mustEditVersion(t, p, "a", "a.txt", v2)
}

func TestLookup(t *testing.T) {
	p := newPolicy(t)
	mustObserve(t, p, "a", "p.txt", Present(v1))
	mustObserve(t, p, "a", "gone.txt", Absent)
	tests := []struct {
		key   string
		want  Observation
		found bool
	}{
		{"p.txt", Observation{Present: true, Version: v1}, true},
		{"gone.txt", Absent, true},
		{"never.txt", Observation{}, false},
		// Keys are exact: no prefix or parent matching.
		{"p.tx", Observation{}, false},
		{"p.txt/x", Observation{}, false},
	}
	for _, tc := range tests {
		got, found, err := p.Lookup("a", tc.key)
		if err != nil || found != tc.found || got != tc.want {
			t.Errorf("Lookup(a, %q) = %+v, %v, %v; want %+v, %v", tc.key, got, found, err, tc.want, tc.found)
		}
	}
}

func TestPerActorIsolation(t *testing.T) {
	p := newPolicy(t)
	mustObserve(t, p, "a", "x.txt", Present(v1))
	mustObserve(t, p, "b", "x.txt", Present(v2))
	mustObserve(t, p, "c", "x.txt", Absent)

	mustWriteIntent(t, p, "a", "x.txt", replaceIf(v1))
	mustWriteIntent(t, p, "b", "x.txt", replaceIf(v2))
	mustWriteIntent(t, p, "c", "x.txt", createIfAbsent)
	mustWriteIntent(t, p, "d", "x.txt", createIfAbsent)

	mustEditVersion(t, p, "a", "x.txt", v1)
	mustEditVersion(t, p, "b", "x.txt", v2)
	mustEditRefused(t, p, "c", "x.txt", ErrObservedAbsent)
	mustEditRefused(t, p, "d", "x.txt", ErrNotObserved)

	// An actor whose name extends another's shares nothing with it.
	mustEditRefused(t, p, "ab", "x.txt", ErrNotObserved)
}

func TestObservationsSurviveReopen(t *testing.T) {
	index := filepath.Join(t.TempDir(), "index.db")
	p, closeFirst := openPolicy(t, index)
	mustObserve(t, p, "a", "x.txt", Present(v1))
	mustObserve(t, p, "a", "gone.txt", Absent)
	mustObserve(t, p, "b", "x.txt", Present(v2))
	closeFirst()

	p, _ = openPolicy(t, index)
	mustWriteIntent(t, p, "a", "x.txt", replaceIf(v1))
	mustEditVersion(t, p, "a", "x.txt", v1)
	mustEditRefused(t, p, "a", "gone.txt", ErrObservedAbsent)
	mustEditVersion(t, p, "b", "x.txt", v2)
	mustEditRefused(t, p, "c", "x.txt", ErrNotObserved)
	actors, err := p.Actors()
	if err != nil || !reflect.DeepEqual(actors, []string{"a", "b"}) {
		t.Fatalf("Actors() after reopen = %q, %v; want [a b]", actors, err)
	}
}

func TestForget(t *testing.T) {
	p := newPolicy(t)
	mustObserve(t, p, "a", "x.txt", Present(v1))
	mustObserve(t, p, "a", "y.txt", Absent)
	mustObserve(t, p, "a", "z/w.txt", Present(v2))
	mustObserve(t, p, "ab", "x.txt", Present(v2)) // shares "a" as a byte prefix
	mustObserve(t, p, "b", "x.txt", Present(v1))

	if err := p.Forget("a"); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	for _, key := range []string{"x.txt", "y.txt", "z/w.txt"} {
		if _, found, err := p.Lookup("a", key); err != nil || found {
			t.Errorf("Lookup(a, %q) after Forget: found %v, err %v", key, found, err)
		}
	}
	mustEditRefused(t, p, "a", "x.txt", ErrNotObserved)
	mustWriteIntent(t, p, "a", "x.txt", createIfAbsent)
	mustEditVersion(t, p, "ab", "x.txt", v2)
	mustEditVersion(t, p, "b", "x.txt", v1)

	// Forgetting an unknown actor, or no owner, is a no-op.
	if err := p.Forget("nobody"); err != nil {
		t.Fatalf("Forget(nobody): %v", err)
	}
	if err := p.Forget(""); err != nil {
		t.Fatalf("Forget(no owner): %v", err)
	}
	actors, err := p.Actors()
	if err != nil || !reflect.DeepEqual(actors, []string{"ab", "b"}) {
		t.Fatalf("Actors() = %q, %v; want [ab b]", actors, err)
	}

	// A forgotten actor can observe again.
	mustObserve(t, p, "a", "x.txt", Present(v2))
	mustEditVersion(t, p, "a", "x.txt", v2)
}

func TestActors(t *testing.T) {
	p := newPolicy(t)
	if actors, err := p.Actors(); err != nil || len(actors) != 0 {
		t.Fatalf("Actors() of an empty policy = %q, %v", actors, err)
	}
	mustObserve(t, p, "zed", "1", Present(v1))
	mustObserve(t, p, "a", "1", Present(v1))
	mustObserve(t, p, "a", "2", Absent)
	mustObserve(t, p, "a", "3", Present(v2))
	mustObserve(t, p, "a b", "1", Absent)
	mustObserve(t, p, "ab", "1", Absent)
	actors, err := p.Actors()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "a b", "ab", "zed"}; !reflect.DeepEqual(actors, want) {
		t.Fatalf("Actors() = %q, want %q (sorted, each once)", actors, want)
	}
}

func TestObserveRefusesNULActor(t *testing.T) {
	p := newPolicy(t)
	if err := p.Observe("a\x00b", "x.txt", Present(v1)); err == nil {
		t.Fatal("Observe with a NUL in the actor succeeded")
	}
	if actors, err := p.Actors(); err != nil || len(actors) != 0 {
		t.Fatalf("Actors() = %q, %v; want nothing recorded", actors, err)
	}
}

func TestNewIsIdempotent(t *testing.T) {
	st, err := versionstore.Open(t.TempDir(), filepath.Join(t.TempDir(), "index.db"), versionstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p1, err := New(st.Observations(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustObserve(t, p1, "a", "x.txt", Present(v1))
	// A second policy over the same file sees the first one's state.
	p2, err := New(st.Observations(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustEditVersion(t, p2, "a", "x.txt", v1)
}
