package fusefs

import (
	"bytes"
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
type Actors struct {
	mu    sync.Mutex
	roots map[proc]string // registered processes
	seen  map[uint32]seen // pid → what was found, for a moment
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

// seenFor is how long a pid's answer is reused: a `tar -x` writes every
// file from one process, and its ancestry does not change.
const seenFor = time.Second

// Register records that pid, and everything it starts, acts for actor.
func (a *Actors) Register(pid int, actor string) error {
	p, ok := procOf(uint32(pid))
	if !ok {
		return fmt.Errorf("register process %d: no such process", pid)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.roots == nil {
		a.roots, a.seen = map[proc]string{}, map[uint32]seen{}
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
	empty := len(a.roots) == 0
	a.mu.Unlock()
	if !empty {
		w.Actor = a.of(w.Pid)
	}
	return w
}

// of is the actor pid acts for, or "".
func (a *Actors) of(pid uint32) string {
	now := time.Now()
	a.mu.Lock()
	if s, ok := a.seen[pid]; ok && now.Sub(s.at) < seenFor {
		a.mu.Unlock()
		return s.actor
	}
	a.mu.Unlock()
	first, ok := procOf(pid)
	if !ok {
		return ""
	}
	actor := ""
	for p, depth := first, 0; depth < 64; depth++ {
		a.mu.Lock()
		found, registered := a.roots[p]
		a.mu.Unlock()
		if registered {
			actor = found
			break
		}
		parent, ok := parentProc(p.pid)
		if !ok || parent.pid <= 1 {
			break
		}
		p = parent
	}
	a.mu.Lock()
	a.seen[pid] = seen{actor: actor, at: now}
	a.mu.Unlock()
	return actor
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
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return nil, false
	}
	return bytes.Fields(b[i+2:]), true
}
