package versionstore

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// The lock order of the store and the mount (fusefs) together, outermost
// first. A goroutine takes a lock only while it holds none ranked after it:
//
//  1. RankMoves: the mount's moves lock (fusefs, writers.go). A rename that
//     moves or replaces a directory holds it exclusively; an open for
//     writing, a create, and a writer's commit or release hold it shared,
//     so none of them counts its file at a path being moved. Never taken
//     twice (a second shared hold waits behind a rename waiting for the
//     first).
//  2. RankFile: the per-file locks (Locks), tools' and mount's alike. At
//     most two at once, in key order (Lock2): a rename's two paths.
//  3. RankBatch: the mount's batch commit (Mount.flushing). Inside it, the
//     group committer and bbolt's own locks.
//
// The rest are leaves, never held while another lock is taken: Locks.mu,
// Mount.mu, the settler's mu, the registry's mu (fusefs writers.mu), and
// go-fuse's tree lock (writers.put reads a node's parent outside writers.mu).
// None of ranks 1–3 is held across a system call on the mount itself, nor
// across one that waits on another process (fusefs, identity.go): the
// kernel would wait on the daemon that holds it.
//
// The order is checked while CheckLockOrder is on: each ranked lock notes
// its take and release (Ranked), and a take after a lock ranked the same
// or later (a second file's lock in key order excepted) is an inversion.

// LockRank is a lock's place in the order above.
type LockRank int

// The ranked locks, outermost first.
const (
	RankMoves LockRank = iota + 1
	RankFile
	RankBatch
)

func (r LockRank) String() string {
	switch r {
	case RankMoves:
		return "the mount's moves lock"
	case RankFile:
		return "a file's lock"
	case RankBatch:
		return "the mount's batch commit"
	}
	return "rank " + strconv.Itoa(int(r))
}

// rankCheck is the order's check: the ranked locks each goroutine holds.
var rankCheck struct {
	on         atomic.Bool
	mu         sync.Mutex
	held       map[uint64][]heldLock
	inversions []string
}

type heldLock struct {
	rank LockRank
	key  string
}

func (h heldLock) String() string {
	if h.key != "" {
		return fmt.Sprintf("%v (%q)", h.rank, h.key)
	}
	return h.rank.String()
}

// CheckLockOrder checks every ranked lock taken from now until stop, which
// returns the inversions seen. Tests turn it on; it costs a stack read per
// lock, and nothing while off.
func CheckLockOrder() (stop func() (inversions []string)) {
	rankCheck.mu.Lock()
	rankCheck.held, rankCheck.inversions = map[uint64][]heldLock{}, nil
	rankCheck.mu.Unlock()
	rankCheck.on.Store(true)
	return func() []string {
		rankCheck.on.Store(false)
		rankCheck.mu.Lock()
		defer rankCheck.mu.Unlock()
		out := rankCheck.inversions
		rankCheck.held, rankCheck.inversions = nil, nil
		return out
	}
}

// Ranked notes that the calling goroutine is about to take a lock of rank
// r (key: the file's, for RankFile) and returns the note of its release,
// to call once the lock is let go, from any goroutine.
func Ranked(r LockRank, key string) (released func()) {
	if !rankCheck.on.Load() {
		return func() {}
	}
	g, take := goroutineID(), heldLock{r, key}
	rankCheck.mu.Lock()
	defer rankCheck.mu.Unlock()
	if rankCheck.held == nil {
		return func() {}
	}
	for _, h := range rankCheck.held[g] {
		if h.rank > r || h.rank == r && (r != RankFile || h.key >= key) {
			rankCheck.inversions = append(rankCheck.inversions, fmt.Sprintf("took %v while holding %v", take, h))
		}
	}
	rankCheck.held[g] = append(rankCheck.held[g], take)
	return func() { forgetHeld(g, take) }
}

// forgetHeld drops g's latest hold of h.
func forgetHeld(g uint64, h heldLock) {
	rankCheck.mu.Lock()
	defer rankCheck.mu.Unlock()
	held := rankCheck.held[g]
	for i := len(held) - 1; i >= 0; i-- {
		if held[i] == h {
			rankCheck.held[g] = append(held[:i:i], held[i+1:]...)
			break
		}
	}
	if len(rankCheck.held[g]) == 0 {
		delete(rankCheck.held, g)
	}
}

// goroutineID is the calling goroutine's number, from its stack's header
// ("goroutine 42 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
