package versionstore

import (
	"path"
	"sync"
)

// Locks is a table of per-file mutexes keyed by workspace-relative real path.
// Tool mutations and FUSE mutations share one table, so a tool's
// check-version-then-publish never interleaves with a shell's write to the
// same file. Entries exist only while someone holds or waits for them.
type Locks struct {
	mu sync.Mutex
	m  map[string]*lockEntry
}

type lockEntry struct {
	mu   sync.Mutex
	refs int // holders plus waiters; guarded by Locks.mu
}

// Lock blocks until the lock for key is held and returns the function that
// releases it. The release function must be called exactly once.
func (l *Locks) Lock(key string) (unlock func()) {
	released := Ranked(RankFile, key) // lockorder.go
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*lockEntry)
	}
	e := l.m[key]
	if e == nil {
		e = &lockEntry{}
		l.m[key] = e
	}
	e.refs++
	l.mu.Unlock()

	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
		released()
	}
}

// Lock2 takes the locks of two keys in a fixed order, so that two callers
// locking the same pair (a rename in each direction) cannot deadlock.
func (l *Locks) Lock2(a, b string) (unlock func()) {
	if a == b {
		return l.Lock(a)
	}
	if b < a {
		a, b = b, a
	}
	ua := l.Lock(a)
	ub := l.Lock(b)
	return func() { ub(); ua() }
}

// Len is the number of keys currently held or waited for.
func (l *Locks) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// heldAbove reports whether the lock of a directory above key is held or
// waited for.
func (l *Locks) heldAbove(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for d := path.Dir(key); d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := l.m[d]; ok {
			return true
		}
	}
	return false
}
