// Package testwait is the one polling wait of mcpd's tests, for what no
// signal can tell (an answer of a process, a row in the database, a
// request at a test server): the condition is polled in short steps under
// a hard cap. Code that can signal (a dispatcher round, an agent's
// heartbeat) is waited on through its signal and a fake clock instead.
package testwait

import (
	"errors"
	"testing"
	"time"
)

// Step is the time between two polls; Cap bounds Eventually: far above
// what a quiet machine needs, since a wait that holds returns at once and
// only a failing one waits it out, so that a loaded machine (the race
// suite five times over beside busy loops) does not fail a wait that would
// have held a little later.
const (
	Step = 20 * time.Millisecond
	Cap  = 30 * time.Second
)

// Until polls cond every Step until it holds, failing t (with what) when it
// does not within limit.
func Until(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	if err := poll(limit, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}); err != nil {
		t.Fatalf("%s: not within %s", what, limit)
	}
}

// Eventually is Until with the limit Cap.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Until(t, what, Cap, cond)
}

// Poll polls check every Step until it returns nil, failing t with what
// and check's last error when it does not within limit: for a wait whose
// failure must say what was seen.
func Poll(t testing.TB, what string, limit time.Duration, check func() error) {
	t.Helper()
	if err := poll(limit, check); err != nil {
		t.Fatalf("%s: not within %s: %v", what, limit, err)
	}
}

var errNotYet = errors.New("not yet")

// poll returns nil once check does, else check's last error at limit.
func poll(limit time.Duration, check func() error) error {
	err := check()
	if err == nil {
		return nil
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(Step)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if err = check(); err == nil {
				return nil
			}
		case <-deadline.C:
			return check()
		}
	}
}

// Wait polls cond every Step until it holds and reports whether it did
// within limit, without failing: for a wait that must clean up (stop a
// goroutine) before the test fails.
func Wait(limit time.Duration, cond func() bool) bool {
	return poll(limit, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) == nil
}

// Throughout calls check every Step for d, and once more at its end: for
// what must hold all along a while (a process that must stay up, an alert
// that must not be sent twice). check fails t itself.
func Throughout(t testing.TB, d time.Duration, check func()) {
	t.Helper()
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(Step)
	defer tick.Stop()
	for {
		check()
		select {
		case <-tick.C:
		case <-end.C:
			check()
			return
		}
	}
}
