// Package backoff holds the one wait that grows after repeated failures,
// shared by every retry in mcpd and mcpctl: the agent's reconnects and
// calls, the alert dispatcher's deliveries and the TUI's reads. It imports
// only the standard library, so that the client side may use it without
// linking anything of the server's.
//
// github.com/cenkalti/backoff (in go.mod only through the OTLP exporter)
// does not fit: its ExponentialBackOff is a stateful timer that spreads
// every step by its own random factor, whereas the callers here count
// their failures themselves, spread the wait each in its own way (a
// Retry-After honoured, the upper half, none at all) and need a pure
// function of the count, so that tests on a fake clock know the wait.
package backoff

import "time"

// Exponential is the wait before attempt n (from 1) after failures: lo for
// the first, doubled for each after it, never more than hi. An n below 1
// counts as 1.
func Exponential(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}
