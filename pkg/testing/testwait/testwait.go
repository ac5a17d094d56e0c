// Package testwait is the one polling wait of mcpd's tests, for what no
// signal can tell (an answer of a process, a row in the database, a
// request at a test server): the condition is polled in short steps under
// a hard cap. Code that can signal (a dispatcher round, an agent's
// heartbeat) is waited on through its signal and a fake clock instead.
package testwait

import (
	"testing"
	"time"
)

// Step is the time between two polls; Cap bounds Eventually.
const (
	Step = 20 * time.Millisecond
	Cap  = 10 * time.Second
)

// Until polls cond every Step until it holds, failing t (with what) when it
// does not within limit.
func Until(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	if cond() {
		return
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(Step)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return
			}
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("%s: not within %s", what, limit)
		}
	}
}

// Eventually is Until with the limit Cap.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Until(t, what, Cap, cond)
}
