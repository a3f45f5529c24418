//go:build race

package integration

// raceEnabled: the tests run with the race detector, and so does the
// binary they drive.
const raceEnabled = true
