package fusefs

import (
	"bytes"
	"log"
	"regexp"
	"sync"
)

// requests counts the FUSE requests a mount receives, by opcode, from
// go-fuse's debug log.
type requests struct {
	mu sync.Mutex
	n  map[string]int
	// keep, if set, says which request lines count.
	keep func(line []byte) bool
}

var requestLine = regexp.MustCompile(`rx \d+: (\w+)`)

func (r *requests) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, line := range bytes.Split(p, []byte("\n")) {
		if m := requestLine.FindSubmatch(line); m != nil && (r.keep == nil || r.keep(line)) {
			r.n[string(m[1])]++
		}
	}
	return len(p), nil
}

// counting makes a mount count its requests in r.
func counting(r *requests) func(*Options) {
	r.n = map[string]int{}
	return func(o *Options) { o.Debug, o.DebugLog = true, log.New(r, "", 0) }
}

// take returns the counts since the last take and starts again.
func (r *requests) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n = map[string]int{}
	return n
}
