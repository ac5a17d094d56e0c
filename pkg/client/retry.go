package client

import (
	"errors"
	"math/rand/v2"
	"time"

	"github.com/cyberos/mcpd/pkg/apiwire"
)

// RetryWait is how long to wait before retrying a call that failed with
// err, when the caller's own backoff says backoff. It is the server's
// Retry-After when that is longer, spread by up to spread of itself more
// (0.2: up to 20%), so that callers refused together do not come back
// together; else the backoff spread by up to spread either way. A positive
// limit caps it, spread below the limit: for a client that heartbeats, its
// heartbeat interval, past which its server would miss a beat. draw returns
// a number in [0, 1); nil draws from math/rand/v2.
func RetryWait(err error, backoff time.Duration, spread float64, limit time.Duration, draw func() float64) time.Duration {
	if draw == nil {
		draw = rand.Float64
	}
	spread = max(0, min(spread, 1))
	var after time.Duration
	var p *apiwire.Problem
	if errors.As(err, &p) {
		after = p.RetryAfter
	}
	f := draw()
	switch base := max(backoff, after); {
	case limit > 0 && base >= limit:
		return time.Duration(float64(limit) * (1 - spread*f))
	case after >= backoff:
		return min(time.Duration(float64(after)*(1+spread*f)), limit0(limit))
	default:
		return min(time.Duration(float64(backoff)*(1+spread*(2*f-1))), limit0(limit))
	}
}

// limit0 is limit, or no limit when it is not positive.
func limit0(limit time.Duration) time.Duration {
	if limit <= 0 {
		return time.Duration(1<<63 - 1)
	}
	return limit
}
