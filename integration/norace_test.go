//go:build !race

package integration

// raceEnabled: benchmarks (make bench runs without -race) time a binary
// built as users build it.
const raceEnabled = false
