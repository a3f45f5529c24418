package fusefs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/dshfs/dshfs/versionstore"
)

// Actors says which actor a process writing through the mount acts for. A
// harness runs its agent's shell commands as its own children, so a write
// by any descendant of a registered process — the harness that started a
// `dshfs mcp` session, or one a harness registered over the socket — is
// recorded with that actor, beside the process's pid and command. The
// nearest registered ancestor wins. A process is known by its pid and its
// start time, so a reused pid is not taken for the process that had it.
//
// An actor's name is a label the caller chose, not an identity: whoever
// may use the socket may register its own processes under any name. What
// it may not do is register another user's (root excepted).
type Actors struct {
	mu    sync.Mutex
	roots map[proc]string // registered processes
	seen  map[proc]seen   // what was found, for a moment
	// fallback is the actor of writes by processes no registered one
	// started (a branch's mount: the actor it was made for); "": none.
	fallback string
}

// SetDefault makes actor the actor of every write through the mount that no
// registered process accounts for.
func (a *Actors) SetDefault(actor string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fallback = actor
}

// proc is a process, across pid reuse.
type proc struct {
	pid   uint32
	start uint64 // clock ticks after boot (/proc/PID/stat field 22)
}

type seen struct {
	actor string
	at    time.Time
}

// seenFor is how long a process's answer is reused: a `tar -x` writes
// every file from one process, and its ancestry does not change.
const seenFor = time.Second

// ErrNotCallersProcess refuses to register a process of another user's.
var ErrNotCallersProcess = errors.New("not the caller's process")

// Register records that pid, and everything it starts, acts for actor, on
// behalf of the user caller: a process of caller's (its real uid), any if
// caller is root. Registered processes that have exited are forgotten.
func (a *Actors) Register(pid int, actor string, caller uint32) error {
	p, ok := procOf(uint32(pid))
	if !ok {
		return fmt.Errorf("register process %d: no such process", pid)
	}
	if caller != 0 {
		owner, ok := ownerOf(p.pid)
		if again, still := procOf(p.pid); !ok || !still || again != p {
			return fmt.Errorf("register process %d: no such process", pid)
		}
		if owner != caller {
			return fmt.Errorf("register process %d: %w: it runs as uid %d, the caller as uid %d", pid, ErrNotCallersProcess, owner, caller)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.roots == nil {
		a.roots, a.seen = map[proc]string{}, map[proc]seen{}
	}
	for r := range a.roots {
		if now, ok := procOf(r.pid); !ok || now != r {
			delete(a.roots, r)
		}
	}
	a.roots[p] = actor
	clear(a.seen)
	return nil
}

// attribute names w's actor from its pid, if a registered process is the
// writer or one of its ancestors.
func (a *Actors) attribute(w versionstore.Writer) versionstore.Writer {
	if a == nil || w.Pid == 0 || w.Actor != "" {
		return w
	}
	a.mu.Lock()
	empty, fallback := len(a.roots) == 0, a.fallback
	a.mu.Unlock()
	if !empty {
		w.Actor = a.of(w.Pid)
	}
	if w.Actor == "" {
		w.Actor = fallback
	}
	return w
}

// of is the actor pid acts for, or "". The answer is kept for the process
// (pid and start time) a moment; the kept answers are dropped once they
// are many and stale.
func (a *Actors) of(pid uint32) string {
	first, ok := procOf(pid)
	if !ok {
		return ""
	}
	now := time.Now()
	a.mu.Lock()
	if s, ok := a.seen[first]; ok && now.Sub(s.at) < seenFor {
		a.mu.Unlock()
		return s.actor
	}
	a.mu.Unlock()
	actor := a.walk(first)
	a.mu.Lock()
	if len(a.seen) >= maxSeen {
		for p, s := range a.seen {
			if now.Sub(s.at) >= seenFor {
				delete(a.seen, p)
			}
		}
	}
	a.seen[first] = seen{actor: actor, at: now}
	a.mu.Unlock()
	return actor
}

// maxSeen is how many kept answers trigger dropping the stale ones.
const maxSeen = 1024

// walk finds the actor of the nearest registered process among p and its
// ancestors.
func (a *Actors) walk(p proc) string {
	for depth := 0; depth < 64; depth++ {
		a.mu.Lock()
		found, registered := a.roots[p]
		a.mu.Unlock()
		if registered {
			return found
		}
		parent, ok := parentProc(p.pid)
		if !ok || parent.pid <= 1 {
			break
		}
		p = parent
	}
	return ""
}

// procOf identifies the running process pid.
func procOf(pid uint32) (proc, bool) {
	fields, ok := statFields(pid)
	if !ok || len(fields) < 20 {
		return proc{}, false
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	return proc{pid, start}, err == nil
}

// parentProc is pid's parent process.
func parentProc(pid uint32) (proc, bool) {
	fields, ok := statFields(pid)
	if !ok || len(fields) < 2 {
		return proc{}, false
	}
	ppid, err := strconv.ParseUint(string(fields[1]), 10, 32)
	if err != nil {
		return proc{}, false
	}
	return procOf(uint32(ppid))
}

// statFields are the fields of /proc/PID/stat after the command name
// (which may hold spaces and parentheses): the state is fields[0], the
// parent fields[1], the start time fields[19].
func statFields(pid uint32) ([][]byte, bool) {
	b, err := readStat(pid)
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return nil, false
	}
	return bytes.Fields(b[i+2:]), true
}

// readStat reads /proc/PID/stat (tests stand in for it).
var readStat = func(pid uint32) ([]byte, error) {
	return os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/stat")
}

// ownerOf is the real uid pid runs as (/proc/PID/status, "Uid:"), the user
// who may signal it and whose process it is.
func ownerOf(pid uint32) (uint32, bool) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return 0, false
	}
	_, rest, ok := bytes.Cut(b, []byte("\nUid:"))
	if !ok {
		return 0, false
	}
	fields := bytes.Fields(rest)
	if len(fields) == 0 {
		return 0, false
	}
	uid, err := strconv.ParseUint(string(fields[0]), 10, 32)
	return uint32(uid), err == nil
}
