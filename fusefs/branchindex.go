package fusefs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
)

// branchIndex records what a branch's upper directory cannot say without
// privilege: the paths it deleted (whiteouts) and the directories it made
// where one was deleted (opaque: nothing of the snapshot shows below them).
// It is a JSON file, replaced whole (write, fsync, rename) on every change.
type branchIndex struct {
	file    string
	mu      sync.Mutex
	entries map[string]string // path → whiteout | opaque
}

const (
	entryWhiteout = "whiteout"
	entryOpaque   = "opaque"
)

func loadBranchIndex(file string) (*branchIndex, error) {
	idx := &branchIndex{file: file, entries: map[string]string{}}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return idx, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &idx.entries); err != nil {
		return nil, fmt.Errorf("read branch index %s: %w", file, err)
	}
	return idx, nil
}

// set records key as kind ("" forgets it) and saves the index.
func (x *branchIndex) set(key, kind string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if kind == "" {
		delete(x.entries, key)
	} else {
		x.entries[key] = kind
	}
	return x.save()
}

func (x *branchIndex) save() error {
	b, err := json.Marshal(x.entries)
	if err != nil {
		return err
	}
	tmp := x.file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, x.file)
}

// dropBelow forgets the entries below directory key, and saves the index
// if there were any.
func (x *branchIndex) dropBelow(key string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := len(x.entries)
	for k := range x.entries {
		if strings.HasPrefix(k, key+"/") {
			delete(x.entries, k)
		}
	}
	if len(x.entries) == n {
		return nil
	}
	return x.save()
}

func (x *branchIndex) get(key string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.entries[key]
}

// hidden reports whether key, or a directory above it, was deleted.
func (x *branchIndex) hidden(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := key; k != "." && k != ""; k = parentKey(k) {
		if x.entries[k] == entryWhiteout {
			return true
		}
	}
	return false
}

// opaqueAbove reports whether key is, or is below, an opaque directory.
func (x *branchIndex) opaqueAbove(key string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := key; k != "." && k != ""; k = parentKey(k) {
		if x.entries[k] == entryOpaque {
			return true
		}
	}
	return false
}

func (x *branchIndex) whiteouts() []string { return x.marked(entryWhiteout) }

// marked lists, sorted, the keys marked one of kinds.
func (x *branchIndex) marked(kinds ...string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for k, kind := range x.entries {
		if slices.Contains(kinds, kind) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// whitedIn lists the names deleted directly in directory dir.
func (x *branchIndex) whitedIn(dir string) map[string]bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := map[string]bool{}
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	for k, kind := range x.entries {
		if kind == entryWhiteout && strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], "/") {
			out[k[len(prefix):]] = true
		}
	}
	return out
}
