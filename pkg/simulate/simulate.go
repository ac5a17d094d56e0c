package simulate

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/apiwire"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/registry"
)

// Options configures a run.
type Options struct {
	// Servers is how many servers to register: PREFIX-0001 and on.
	Servers int
	// Duration is the length of the heartbeat phase, after registration.
	Duration time.Duration
	// Interval between two heartbeats of a server; 0: the
	// heartbeat_interval_seconds of the registration answer.
	Interval time.Duration
	// Jitter spreads each wait by up to this fraction of the interval, either
	// way; 0: DefaultJitter; negative: none.
	Jitter float64
	// MissRate is the fraction of heartbeats skipped on purpose, at random.
	MissRate float64
	// Prefix of the module names; "": DefaultPrefix.
	Prefix string
	// Concurrency bounds the calls in flight; 0: min(Servers, 256).
	Concurrency int
	// ScenarioFile names a YAML scenario (see LoadScenario); "": none.
	ScenarioFile string
	// Verify compares, at the end, every server's status with what the run
	// implies.
	Verify bool
	// Progress receives a live line, rewritten once a second; nil: none.
	Progress io.Writer
	// Seed of the jitter and miss choices; 0: one from the clock (reported
	// in the summary).
	Seed int64
}

// Defaults of Options.
const (
	DefaultJitter         = 0.1
	DefaultPrefix         = "sim"
	DefaultMaxConcurrency = 256
	// Version and protocol that every simulated server registers with.
	SimVersion  = "1.0.0"
	SimProtocol = "2025-06-18"
	// drainTimeout bounds the calls still in flight when a phase ends.
	drainTimeout = 5 * time.Second
)

// ErrOptions marks options that cannot run.
var ErrOptions = errors.New("invalid simulation options")

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

func (o Options) withDefaults() (Options, error) {
	if o.Servers <= 0 {
		return o, fmt.Errorf("%w: servers %d is not positive", ErrOptions, o.Servers)
	}
	if o.Duration <= 0 {
		return o, fmt.Errorf("%w: duration %s is not positive", ErrOptions, o.Duration)
	}
	if o.Interval < 0 {
		return o, fmt.Errorf("%w: interval %s is negative", ErrOptions, o.Interval)
	}
	switch {
	case o.Jitter == 0:
		o.Jitter = DefaultJitter
	case o.Jitter < 0:
		o.Jitter = 0
	case !(o.Jitter < 1): // NaN too
		return o, fmt.Errorf("%w: jitter %v is not below 1", ErrOptions, o.Jitter)
	}
	if o.MissRate < 0 || o.MissRate > 1 || math.IsNaN(o.MissRate) {
		return o, fmt.Errorf("%w: miss rate %v is not in [0, 1]", ErrOptions, o.MissRate)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if name := moduleName(o.Prefix, o.Servers-1); !prefixRE.MatchString(o.Prefix) || len(name) > 63 {
		return o, fmt.Errorf("%w: prefix %q does not make module names of 1-63 [a-z0-9-] starting with a letter", ErrOptions, o.Prefix)
	}
	if o.Concurrency < 0 {
		return o, fmt.Errorf("%w: concurrency %d is negative", ErrOptions, o.Concurrency)
	}
	if o.Concurrency == 0 {
		o.Concurrency = min(o.Servers, DefaultMaxConcurrency)
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	return o, nil
}

// moduleName is the module of server index i (from 0): PREFIX-0001 and on.
func moduleName(prefix string, i int) string { return fmt.Sprintf("%s-%04d", prefix, i+1) }

// apiClient is what a run needs of the client.
type apiClient interface {
	Register(ctx context.Context, req apiwire.RegisterRequest, traceparent string) (registry.Server, bool, error)
	Heartbeat(ctx context.Context, id uuid.UUID) (registry.Server, error)
	Deregister(ctx context.Context, id uuid.UUID) (registry.Server, error)
	AllServers(ctx context.Context, p client.ListServersParams) ([]registry.Server, error)
}

var _ apiClient = (*client.Client)(nil)

// Run registers opts.Servers servers and heartbeats them for opts.Duration,
// following the scenario, then verifies when asked. Servers stay registered
// at the end unless the scenario says deregister_at_end. A failed
// verification is Summary.VerifyFailed, not an error. When ctx ends early,
// the summary of what was done comes back with ctx's error.
func Run(ctx context.Context, c *client.Client, opts Options) (Summary, error) {
	return run(ctx, c, opts)
}

func run(ctx context.Context, c apiClient, opts Options) (Summary, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Summary{}, err
	}
	var sc *Scenario
	if opts.ScenarioFile != "" {
		if sc, err = LoadScenario(opts.ScenarioFile); err != nil {
			return Summary{}, err
		}
	}
	steps, err := sc.plan(opts.Servers, opts.Duration)
	if err != nil {
		return Summary{}, err
	}
	r := newRunner(c, opts, steps)
	defer r.pool.close()

	stopProgress := r.startProgress()
	defer stopProgress()

	if err := r.register(ctx); err != nil {
		return r.summary(), err
	}
	r.heartbeatPhase(ctx)
	stopProgress()
	sum := r.summary()
	if err := ctx.Err(); err != nil {
		return sum, fmt.Errorf("simulate: %w", err)
	}
	if opts.Verify {
		v, err := r.verify(ctx)
		if err != nil {
			return sum, err
		}
		sum.Verify, sum.VerifyFailed = v, len(v.Mismatches) > 0
	}
	if sc != nil && sc.DeregisterAtEnd {
		if err := r.deregisterAll(ctx); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// sim is one simulated server. The scheduler alone touches stopped and
// writes gone; the workers write the other atomics.
type sim struct {
	index   int
	id      uuid.UUID
	stopped bool
	gone    atomic.Bool  // deregistered by the scenario
	lastOK  atomic.Int64 // nanoseconds since runner.base of the last acknowledged call
	deregOK atomic.Bool
	deregNo atomic.Bool // a deregistration was tried and failed
}

type runner struct {
	c        apiClient
	opts     Options
	steps    []step
	rng      *rand.Rand
	pool     *pool
	base     time.Time // monotonic reference of lastOK
	interval time.Duration
	sims     []*sim

	registering atomic.Int64 // registrations done, for the progress line
	phaseStart  atomic.Int64 // nanoseconds since base; 0: not started
	phaseEnd    atomic.Int64

	sent, ok, failed, missed, paused atomic.Int64
	lat                              histogram
	mu                               sync.Mutex
	byStatus                         map[string]int64
	deregistered                     int // scheduler only
}

func newRunner(c apiClient, opts Options, steps []step) *runner {
	seed := uint64(opts.Seed)
	return &runner{
		c: c, opts: opts, steps: steps,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		pool:     newPool(opts.Concurrency),
		base:     time.Now(),
		byStatus: map[string]int64{},
	}
}

func (r *runner) since() time.Duration { return time.Since(r.base) }

// register registers every server through the pool; the first failure
// stops the others and is returned.
func (r *runner) register(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.sims = make([]*sim, r.opts.Servers)
	var interval atomic.Int64
	var wg sync.WaitGroup
	for i := range r.sims {
		s := &sim{index: i}
		r.sims[i] = s
		wg.Add(1)
		submitted := r.pool.submit(ctx, func() {
			defer wg.Done()
			if ctx.Err() != nil {
				return
			}
			srv, err := r.registerOne(ctx, apiwire.RegisterRequest{
				ModuleName:         moduleName(r.opts.Prefix, i),
				Version:            SimVersion,
				SupportedProtocols: []string{SimProtocol},
				Skills:             []registry.SkillInfo{{Name: "echo", Description: "simulated by mcpctl heartbeat-simulate"}},
			})
			if err != nil {
				cancel(fmt.Errorf("register %s: %w", moduleName(r.opts.Prefix, i), err))
				return
			}
			s.id = srv.ServerID
			s.lastOK.Store(int64(r.since()))
			interval.CompareAndSwap(0, int64(srv.HeartbeatIntervalSecs*float64(time.Second)))
			r.registering.Add(1)
		})
		if !submitted {
			wg.Done()
			break
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	r.interval = r.opts.Interval
	if r.interval == 0 {
		r.interval = time.Duration(interval.Load())
	}
	if r.interval <= 0 {
		r.interval = registry.DefaultHeartbeatInterval
	}
	return nil
}

// registerAttempts bounds the tries of one registration that mcpd asks to
// retry later (429, 503): a registry under load, or one that lost its
// database for a moment, is not a reason to abandon the run.
const registerAttempts = 5

// registerOne registers req, trying again after the Retry-After of a 429
// or a 503, registerAttempts times at most; registration is idempotent.
func (r *runner) registerOne(ctx context.Context, req apiwire.RegisterRequest) (registry.Server, error) {
	for attempt := 1; ; attempt++ {
		srv, _, err := r.c.Register(ctx, req, "")
		var p *apiwire.Problem
		if err == nil || attempt == registerAttempts || !errors.As(err, &p) ||
			p.Status != http.StatusTooManyRequests && p.Status != http.StatusServiceUnavailable {
			return srv, err
		}
		wait := time.NewTimer(client.RetryWait(err, time.Duration(attempt)*200*time.Millisecond, 0.5, 10*time.Second, nil))
		select {
		case <-ctx.Done():
			wait.Stop()
			return srv, err
		case <-wait.C:
		}
	}
}

// heartbeatPhase heartbeats every server until the end of the duration (or
// of ctx), applying the scenario, and waits for the calls in flight.
func (r *runner) heartbeatPhase(ctx context.Context) {
	start := r.since()
	end := start + r.opts.Duration
	r.phaseStart.Store(int64(start))
	defer func() { r.phaseEnd.Store(int64(r.since())) }()

	// Calls may finish a little after the end; the scheduler stops at it.
	callCtx, cancelCalls := context.WithDeadline(ctx, r.base.Add(end+drainTimeout))
	defer cancelCalls()
	schedCtx, cancelSched := context.WithDeadline(ctx, r.base.Add(end))
	defer cancelSched()

	var inflight sync.WaitGroup
	defer inflight.Wait()

	// The first heartbeat of each server comes within one interval of its
	// registration, at a random phase, so that the load is even.
	q := make(dueQueue, 0, len(r.sims))
	for _, s := range r.sims {
		due := time.Duration(s.lastOK.Load()) + time.Duration(r.rng.Float64()*float64(r.interval))
		q = append(q, &slot{due: due, s: s, pos: len(q)})
	}
	heap.Init(&q)
	bySim := make(map[*sim]*slot, len(q))
	for _, sl := range q {
		bySim[sl.s] = sl
	}

	send := func(fn func()) bool {
		inflight.Add(1)
		if !r.pool.submit(schedCtx, func() { defer inflight.Done(); fn() }) {
			inflight.Done()
			return false
		}
		return true
	}

	timer := time.NewTimer(0)
	defer timer.Stop()
	next := 0 // of r.steps
	for {
		now := r.since()
		if now >= end || schedCtx.Err() != nil {
			return
		}
		for next < len(r.steps) && start+r.steps[next].at <= now {
			st := r.steps[next]
			next++
			for _, i := range st.servers {
				s := r.sims[i]
				if s.gone.Load() {
					continue
				}
				switch st.action {
				case ActionStop:
					s.stopped = true
				case ActionResume:
					if s.stopped {
						s.stopped = false
						sl := bySim[s]
						sl.due = now // a server that comes back says so at once
						heap.Fix(&q, sl.pos)
					}
				case ActionDeregister:
					s.gone.Store(true)
					r.deregistered++
					if !send(func() { r.deregister(callCtx, s) }) {
						return
					}
				}
			}
		}
		for q.Len() > 0 && q[0].due <= now {
			sl := q[0]
			s := sl.s
			if s.gone.Load() {
				heap.Pop(&q)
				continue
			}
			sl.due += r.wait()
			if sl.due <= now { // far behind: do not burst to catch up
				sl.due = now + r.wait()
			}
			heap.Fix(&q, 0)
			switch {
			case s.stopped:
				r.paused.Add(1)
			case r.opts.MissRate > 0 && r.rng.Float64() < r.opts.MissRate:
				r.missed.Add(1)
			default:
				if !send(func() { r.heartbeat(callCtx, s) }) {
					return
				}
			}
		}
		wake := end
		if q.Len() > 0 {
			wake = min(wake, q[0].due)
		}
		if next < len(r.steps) {
			wake = min(wake, start+r.steps[next].at)
		}
		timer.Reset(max(wake-r.since(), 0))
		select {
		case <-schedCtx.Done():
			return
		case <-timer.C:
		}
	}
}

// wait is one interval with jitter.
func (r *runner) wait() time.Duration {
	f := 1 + r.opts.Jitter*(2*r.rng.Float64()-1)
	return max(time.Duration(f*float64(r.interval)), time.Millisecond)
}

func (r *runner) heartbeat(ctx context.Context, s *sim) {
	t0 := time.Now()
	_, err := r.c.Heartbeat(ctx, s.id)
	if err != nil && (ctx.Err() != nil || s.gone.Load()) {
		// Cut off at the end of the run, or racing the scenario's own
		// deregistration: not the API's fault.
		return
	}
	r.sent.Add(1)
	r.lat.record(time.Since(t0))
	if err != nil {
		r.fail(err)
		return
	}
	r.ok.Add(1)
	s.lastOK.Store(int64(r.since()))
}

func (r *runner) deregister(ctx context.Context, s *sim) {
	_, err := r.c.Deregister(ctx, s.id)
	if err != nil {
		s.deregNo.Store(true)
		if ctx.Err() == nil {
			r.fail(err)
		}
		return
	}
	s.deregOK.Store(true)
}

func (r *runner) fail(err error) {
	key := "transport"
	if p, ok := errors.AsType[*apiwire.Problem](err); ok {
		key = strconv.Itoa(p.Status)
	}
	r.failed.Add(1)
	r.mu.Lock()
	r.byStatus[key]++
	r.mu.Unlock()
}

// deregisterAll deregisters every server still registered, for a scenario
// that asks it.
func (r *runner) deregisterAll(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, s := range r.sims {
		if s.deregOK.Load() {
			continue
		}
		wg.Add(1)
		if !r.pool.submit(ctx, func() {
			defer wg.Done()
			if _, err := r.c.Deregister(ctx, s.id); err != nil {
				cancel(fmt.Errorf("deregister %s at the end: %w", moduleName(r.opts.Prefix, s.index), err))
			}
		}) {
			wg.Done()
			break
		}
	}
	wg.Wait()
	return context.Cause(ctx)
}

func (r *runner) summary() Summary {
	start, end := time.Duration(r.phaseStart.Load()), time.Duration(r.phaseEnd.Load())
	elapsed := max(end-start, 0)
	sum := Summary{
		Servers:           r.opts.Servers,
		IntervalSeconds:   r.interval.Seconds(),
		Seed:              r.opts.Seed,
		DurationSeconds:   round3(elapsed.Seconds()),
		HeartbeatsSent:    r.sent.Load(),
		HeartbeatsOK:      r.ok.Load(),
		Errors:            r.failed.Load(),
		LatencyP50Ms:      ms(r.lat.quantile(0.50)),
		LatencyP90Ms:      ms(r.lat.quantile(0.90)),
		LatencyP99Ms:      ms(r.lat.quantile(0.99)),
		LatencyMaxMs:      ms(r.lat.maxValue()),
		Missed:            r.missed.Load(),
		SkippedByScenario: r.paused.Load(),
		Deregistered:      r.deregistered,
	}
	if elapsed > 0 {
		sum.HeartbeatsPerSecond = round3(float64(sum.HeartbeatsSent) / elapsed.Seconds())
	}
	r.mu.Lock()
	sum.ErrorsByStatus = make(map[string]int64, len(r.byStatus))
	for k, v := range r.byStatus {
		sum.ErrorsByStatus[k] = v
	}
	r.mu.Unlock()
	return sum
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// slot is a server's place in the scheduler's queue.
type slot struct {
	due time.Duration // since runner.base
	s   *sim
	pos int
}

// dueQueue is a min-heap of slots by due time.
type dueQueue []*slot

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].due < q[j].due }
func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].pos, q[j].pos = i, j
}
func (q *dueQueue) Push(x any) { sl := x.(*slot); sl.pos = len(*q); *q = append(*q, sl) }
func (q *dueQueue) Pop() any {
	old := *q
	sl := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	sl.pos = -1
	return sl
}

// pool runs submitted functions on a fixed number of goroutines.
type pool struct {
	jobs chan func()
	wg   sync.WaitGroup
	once sync.Once
}

func newPool(n int) *pool {
	p := &pool{jobs: make(chan func())}
	for range n {
		p.wg.Go(func() {
			for fn := range p.jobs {
				fn()
			}
		})
	}
	return p
}

// submit hands fn to a free worker, waiting for one; false when ctx ends
// first (fn does not run).
func (p *pool) submit(ctx context.Context, fn func()) bool {
	select {
	case p.jobs <- fn:
		return true
	case <-ctx.Done():
		return false
	}
}

// close stops the workers once their work is done.
func (p *pool) close() {
	p.once.Do(func() {
		close(p.jobs)
		p.wg.Wait()
	})
}
