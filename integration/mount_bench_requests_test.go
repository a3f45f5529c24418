package integration

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"sync"
	"testing"
	"time"
)

// requests are the FUSE requests of each system and workload, by opcode.
type requests map[string]map[string]map[string]int

// countRequests runs every workload once more on each daemon with request
// logging on (dshfs and go-fuse: --debug; libfuse: -d), untimed, and counts
// the requests each one sent.
func countRequests(b *testing.B, fx *fixtures, daemons []benchSystem) requests {
	all := requests{}
	for _, sys := range daemons {
		c := &opCounter{n: map[string]int{}}
		all[sys.name] = countWorkloads(b, fx, sys, c)
		fmt.Printf("requests counted: %s\n", sys.name)
	}
	return all
}

func countWorkloads(b *testing.B, fx *fixtures, sys benchSystem, c *opCounter) map[string]map[string]int {
	var s *served
	per := map[string]map[string]int{}
	for _, w := range workloads {
		if w.fresh {
			s = s.restart(b, sys, c)
		}
		if w.prep != nil {
			w.prep(b, fx, s.dir)
		}
		before := c.settled()
		w.timed(b, fx, s.dir)
		per[w.name] = diff(c.settled(), before)
	}
	s.stop()
	return per
}

func diff(after, before map[string]int) map[string]int {
	d := map[string]int{}
	for op, n := range after {
		if n > before[op] {
			d[op] = n - before[op]
		}
	}
	return d
}

// An opCounter counts the requests in a daemon's debug log: go-fuse logs
// "rx 12: LOOKUP n1 ...", libfuse "unique: 12, opcode: LOOKUP (1), ...".
// It is written to in arbitrary pieces, so it keeps a partial last line.
type opCounter struct {
	mu      sync.Mutex
	n       map[string]int
	partial []byte
	total   int
}

var opcodeRe = regexp.MustCompile(`(?:rx \d+: |opcode: )([A-Z_0-9]+)`)

func (c *opCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		if m := opcodeRe.FindSubmatch(c.partial[:i]); m != nil {
			c.n[string(m[1])]++
			c.total++
		}
		c.partial = c.partial[i+1:]
	}
}

// settled returns the counts once no request has come for 300 ms (at most
// 10 s): asynchronous ones, such as RELEASE, count for the workload that
// caused them.
func (c *opCounter) settled() map[string]int {
	last, total := c.snapshot()
	for deadline, stable := time.Now().Add(10*time.Second), 0; stable < 3 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		now, nowTotal := c.snapshot()
		if nowTotal == total {
			stable++
		} else {
			stable = 0
		}
		last, total = now, nowTotal
	}
	return last
}

func (c *opCounter) snapshot() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n), c.total
}
