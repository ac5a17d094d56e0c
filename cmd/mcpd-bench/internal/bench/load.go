package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one call of a load: seq numbers the calls of the load from 0.
type Op func(ctx context.Context, seq int64) error

// LoadResult is what a load measured. Latencies are of successful calls.
type LoadResult struct {
	Workers    int           `json:"workers"`
	Calls      int64         `json:"calls"`
	Errors     int64         `json:"errors"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	Throughput float64       `json:"throughput_per_s"` // successful calls per second
	// OfferedRate is the open loop's schedule (calls per second); 0 for a
	// closed loop.
	OfferedRate float64       `json:"offered_rate_per_s,omitempty"`
	P50         time.Duration `json:"p50_ns"`
	P90         time.Duration `json:"p90_ns"`
	P99         time.Duration `json:"p99_ns"`
	P999        time.Duration `json:"p999_ns"`
	Max         time.Duration `json:"max_ns"`
	FirstError  string        `json:"first_error,omitempty"`
	// Series is the latencies over time, per seriesBucket of wall clock by
	// the calls' ends, for the loads that time their calls (the closed and
	// the open loop); the runner reports it where a tail is looked into.
	Series []Bucket `json:"-"`
	// Above is the share of the calls longer than each of tailBounds.
	Above []float64 `json:"-"`
}

// recorder gathers the latencies and errors of one load.
type recorder struct {
	mu       sync.Mutex
	lat      []time.Duration
	ends     []time.Duration // since start, parallel to lat when timed
	start    time.Time
	errors   atomic.Int64
	firstErr atomic.Pointer[string]
}

func (r *recorder) add(lat []time.Duration) {
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.mu.Unlock()
}

// addTimed adds latencies with the times their calls ended (since start).
func (r *recorder) addTimed(lat, ends []time.Duration) {
	r.mu.Lock()
	r.lat = append(r.lat, lat...)
	r.ends = append(r.ends, ends...)
	r.mu.Unlock()
}

func (r *recorder) fail(err error) {
	r.errors.Add(1)
	s := err.Error()
	r.firstErr.CompareAndSwap(nil, &s)
}

func (r *recorder) result(workers int, elapsed time.Duration) LoadResult {
	res := LoadResult{Workers: workers, Calls: int64(len(r.lat)) + r.errors.Load(), Errors: r.errors.Load(), Elapsed: elapsed}
	if p := r.firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	if elapsed > 0 {
		res.Throughput = float64(len(r.lat)) / elapsed.Seconds()
	}
	if len(r.ends) == len(r.lat) && len(r.lat) > 0 {
		res.Series = series(r.start, r.ends, r.lat, seriesBucket)
	}
	slices.Sort(r.lat)
	for _, le := range tailBounds {
		i, _ := slices.BinarySearch(r.lat, le+1)
		res.Above = append(res.Above, share(len(r.lat)-i, len(r.lat)))
	}
	res.P50, res.P90, res.P99, res.P999 = Quantile(r.lat, 0.50), Quantile(r.lat, 0.90), Quantile(r.lat, 0.99), Quantile(r.lat, 0.999)
	if len(r.lat) > 0 {
		res.Max = r.lat[len(r.lat)-1]
	}
	return res
}

// Quantile is the q-quantile (nearest rank) of sorted; 0 when it is empty.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ClosedLoop runs op from workers goroutines, each calling again as soon as
// its call returns, for d or until maxCalls calls have started, whichever
// comes first.
func ClosedLoop(ctx context.Context, workers int, d time.Duration, maxCalls int64, op Op) LoadResult {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		rec  recorder
		next atomic.Int64
		wg   sync.WaitGroup
	)
	start := time.Now()
	rec.start = start
	for range workers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			ends := make([]time.Duration, 0, 4096)
			for ctx.Err() == nil {
				seq := next.Add(1) - 1
				if seq >= maxCalls {
					break
				}
				t0 := time.Now()
				if err := op(ctx, seq); err != nil {
					if ctx.Err() == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						rec.fail(err)
					}
					continue
				}
				t1 := time.Now()
				lat = append(lat, t1.Sub(t0))
				ends = append(ends, t1.Sub(start))
			}
			rec.addTimed(lat, ends)
		})
	}
	wg.Wait()
	return rec.result(workers, time.Since(start))
}

// OpenLoop starts calls of op at rate per second, on schedule whatever the
// calls' latencies, for d (at most maxCalls calls), with up to workers calls
// in flight. A call's latency runs from the time it was due, so that waiting
// for a free worker counts (no coordinated omission). Calls still queued or
// running at d get drain more time to finish.
func OpenLoop(ctx context.Context, rate float64, workers int, d, drain time.Duration, maxCalls int64, op Op) LoadResult {
	total := min(int64(rate*d.Seconds()), maxCalls)
	if total <= 0 || workers <= 0 {
		return LoadResult{Workers: workers, OfferedRate: rate}
	}
	ctx, cancel := context.WithTimeout(ctx, d+drain)
	defer cancel()
	due := make(chan time.Time, min(total, 1<<20))
	var (
		rec  recorder
		next atomic.Int64
		wg   sync.WaitGroup
	)
	// start is set once the workers run; they read it after a receive on
	// due, which comes after.
	var start time.Time
	for range workers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1024)
			ends := make([]time.Duration, 0, 1024)
			for at := range due {
				if ctx.Err() != nil {
					rec.fail(ctx.Err())
					continue
				}
				if err := op(ctx, next.Add(1)-1); err != nil {
					rec.fail(err)
					continue
				}
				t1 := time.Now()
				lat = append(lat, t1.Sub(at))
				ends = append(ends, t1.Sub(start))
			}
			rec.addTimed(lat, ends)
		})
	}
	start = time.Now()
	rec.start = start
	interval := time.Duration(float64(time.Second) / rate)
	var sent int64
pace:
	for sent < total {
		now := time.Now()
		target := min(int64(float64(now.Sub(start))/float64(interval))+1, total)
		for ; sent < target; sent++ {
			select {
			case due <- start.Add(time.Duration(sent) * interval):
			case <-ctx.Done():
				break pace
			}
		}
		// Sleep to the next call's time; short sleeps overshoot, and the
		// next turn sends what fell due meanwhile.
		if wait := time.Until(start.Add(time.Duration(sent) * interval)); wait > 0 {
			time.Sleep(wait)
		}
	}
	close(due)
	wg.Wait()
	res := rec.result(workers, time.Since(start))
	res.OfferedRate = rate
	if lost := total - res.Calls; lost > 0 {
		res.Errors += lost // never started: the run ended first
		res.Calls = total
	}
	return res
}
