package pgstore

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// On Citus a tenant's sweep is a call of mcp_sweep_tenant, one transaction
// that writes each transition's statements through Citus's planner on the
// worker: a millisecond or more each, so a call of the monitor's whole
// batch (a thousand) can outlast its share of the sweep's time. Cancelled,
// it writes nothing, and the next sweep would try the same call again: a
// large tenant whose servers all went silent would never be marked (found
// by a black-box run, 2026-12-06: 6,000 silent servers of one tenant,
// 2,577 still healthy after 18 intervals). So the calls are sized: a
// tenant with more due than one call moves is called again while the
// sweep has time and limit left, each call committing its own share. The
// size starts at sweepCallFirst, halves after a call that ran out of its
// time or took more than half of it, and doubles after a full call that
// took less than a quarter, between sweepCallMin and sweepCallMax.
const (
	sweepCallFirst = 64
	sweepCallMin   = 8
	sweepCallMax   = 512
)

// sweepCallSize is the number of transitions a call of a tenant's sweep
// may make, adjusted by each call's time (see above).
type sweepCallSize struct {
	size atomic.Int64 // 0: sweepCallFirst
}

// get returns the present size.
func (z *sweepCallSize) get() int {
	if n := z.size.Load(); n > 0 {
		return int(n)
	}
	return sweepCallFirst
}

// timed runs call with a limit of at most want transitions and adjusts the
// size by how long it took against its share of ctx's time (workerShare).
func (z *sweepCallSize) timed(ctx context.Context, want int, call func(limit int) (moved int, err error)) {
	limit := min(want, z.get())
	share, _, bounded := workerShareTime(ctx)
	start := time.Now()
	moved, err := call(limit)
	if bounded {
		z.adjust(limit, moved, time.Since(start), share, err)
	}
}

// adjust sets the next size after a call of limit transitions that moved
// moved in took, of a share of its time, and failed with err.
func (z *sweepCallSize) adjust(limit, moved int, took, share time.Duration, err error) {
	var next int
	switch {
	case err != nil && !ranOutOfTime(err):
		return // a failure that is not the call's size
	case err != nil || took > share/2:
		next = max(limit/2, sweepCallMin)
	case moved == limit && took < share/4 && limit >= z.get():
		next = min(limit*2, sweepCallMax)
	default:
		return
	}
	z.size.Store(int64(next))
}

// ranOutOfTime reports whether err is a call cancelled for its deadline.
func ranOutOfTime(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &pgErr) && pgErr.Code == pgerrcode.QueryCanceled)
}
