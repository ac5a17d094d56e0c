//go:build race

package daemon_test

// raceEnabled: the race detector is on, which multiplies the CPU of every
// call several times over; timing ratios mean little then.
const raceEnabled = true
