package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// The size of a tenant's sweep calls halves after a call that ran out of
// its time or took more than half of it, doubles after a full call that
// took less than a quarter, stays within its bounds, and is not changed by
// a failure that says nothing of the call's size or by a call that asked
// for less than the size.
func TestSweepCallSizeAdjusts(t *testing.T) {
	const share = time.Second
	cancelled := &pgconn.PgError{Code: pgerrcode.QueryCanceled}
	for _, c := range []struct {
		name  string
		size  int
		limit int
		moved int
		took  time.Duration
		err   error
		want  int
	}{
		{"full and quick: doubles", 64, 64, 64, 100 * time.Millisecond, nil, 128},
		{"full and quick at the top: stays", sweepCallMax, sweepCallMax, sweepCallMax, time.Millisecond, nil, sweepCallMax},
		{"quick but short of the limit: stays", 64, 64, 10, time.Millisecond, nil, 64},
		{"full and quick, asked for less than the size: stays", 64, 16, 16, time.Millisecond, nil, 64},
		{"between a quarter and a half: stays", 64, 64, 64, 400 * time.Millisecond, nil, 64},
		{"more than half: halves", 64, 64, 64, 600 * time.Millisecond, nil, 32},
		{"cancelled for its time: halves", 64, 64, 0, share, cancelled, 32},
		{"past its deadline: halves", 64, 64, 0, share, fmt.Errorf("sweep: %w", context.DeadlineExceeded), 32},
		{"at the bottom: stays", sweepCallMin, sweepCallMin, 0, share, cancelled, sweepCallMin},
		{"another failure: stays", 64, 64, 0, time.Millisecond, errors.New("connection refused"), 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			var z sweepCallSize
			z.size.Store(int64(c.size))
			z.adjust(c.limit, c.moved, c.took, share, c.err)
			if got := z.get(); got != c.want {
				t.Errorf("size %d, call of %d moving %d in %s (err %v): next size %d, want %d",
					c.size, c.limit, c.moved, c.took, c.err, got, c.want)
			}
		})
	}
	var fresh sweepCallSize
	if got := fresh.get(); got != sweepCallFirst {
		t.Errorf("a fresh size: %d, want %d", got, sweepCallFirst)
	}
}
