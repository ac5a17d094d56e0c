//go:build !race

package daemon_test

// raceEnabled: the race detector is on.
const raceEnabled = false
