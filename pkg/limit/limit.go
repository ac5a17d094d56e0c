package limit

import (
	"math"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"
)

// Defaults of Options.
const (
	DefaultRate       = 2000
	DefaultBurst      = 4000
	DefaultMaxWatches = 100
	// DefaultMaxBuckets bounds the request buckets kept at once.
	DefaultMaxBuckets = 100_000
)

// shards splits the buckets so that tenants seldom wait for one another's
// lock.
const shards = 16

// Options configures New.
type Options struct {
	// Rate is the requests per second each tenant may make; 0: no limit.
	Rate float64
	// Burst is how many requests a tenant may make at once; at least 1
	// when Rate is set.
	Burst int
	// MaxWatches is the most concurrent watch streams of a tenant; 0: no
	// limit.
	MaxWatches int
	// MaxBuckets bounds the request buckets kept (0: DefaultMaxBuckets).
	// A bucket idle long enough to be full again is dropped, which loses
	// nothing; past the bound, buckets are dropped even so.
	MaxBuckets int
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Tenants holds every tenant's request bucket and watch count. It is safe
// for concurrent use; a nil *Tenants limits nothing.
type Tenants struct {
	rate       rate.Limit
	burst      int
	maxWatches int
	perShard   int
	// refill is how long an unused bucket takes to be full again.
	refill time.Duration
	now    func() time.Time

	shards [shards]shard

	watchMu sync.Mutex
	watches map[uuid.UUID]int
}

type shard struct {
	mu        sync.Mutex
	buckets   map[uuid.UUID]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// New returns the limits of opts.
func New(opts Options) *Tenants {
	t := &Tenants{
		rate:       rate.Limit(opts.Rate),
		burst:      opts.Burst,
		maxWatches: opts.MaxWatches,
		now:        opts.Now,
		watches:    make(map[uuid.UUID]int),
	}
	if t.now == nil {
		t.now = time.Now
	}
	maxBuckets := opts.MaxBuckets
	if maxBuckets <= 0 {
		maxBuckets = DefaultMaxBuckets
	}
	t.perShard = max(maxBuckets/shards, 1)
	if opts.Rate > 0 {
		t.refill = time.Duration(float64(max(opts.Burst, 1)) / opts.Rate * float64(time.Second))
	}
	for i := range t.shards {
		t.shards[i].buckets = make(map[uuid.UUID]*bucket)
	}
	return t
}

// Allow takes one request from tenant's bucket. When the bucket is empty it
// reports false and how long until a request would be allowed.
func (t *Tenants) Allow(tenant uuid.UUID) (ok bool, retryAfter time.Duration) {
	if t == nil || t.rate <= 0 {
		return true, 0
	}
	now := t.now()
	s := &t.shards[tenant[0]%shards]
	s.mu.Lock()
	b := s.buckets[tenant]
	if b == nil {
		s.makeRoom(now, t.refill, t.perShard)
		b = &bucket{lim: rate.NewLimiter(t.rate, t.burst)}
		s.buckets[tenant] = b
	}
	b.used = now
	s.mu.Unlock()

	if b.lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - b.lim.TokensAt(now)
	wait := time.Duration(math.Ceil(missing / float64(t.rate) * float64(time.Second)))
	return false, max(wait, time.Nanosecond)
}

// makeRoom drops the buckets that are full again (idle for refill), at
// most once per refill unless the shard is at its bound; at the bound with
// none idle, it drops one anyway (its tenant starts again from a full
// bucket: at most one burst more).
func (s *shard) makeRoom(now time.Time, refill time.Duration, limit int) {
	full := len(s.buckets) >= limit
	if !full && now.Sub(s.lastSweep) < refill {
		return
	}
	s.lastSweep = now
	for id, b := range s.buckets {
		if now.Sub(b.used) >= refill {
			delete(s.buckets, id)
		}
	}
	if len(s.buckets) >= limit {
		for id := range s.buckets {
			delete(s.buckets, id)
			break
		}
	}
}

// Buckets returns how many request buckets are kept.
func (t *Tenants) Buckets() int {
	if t == nil {
		return 0
	}
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.buckets)
		s.mu.Unlock()
	}
	return n
}

// AcquireWatch counts one more watch stream of tenant, unless the tenant
// has MaxWatches already. release, called once when the stream ends, gives
// it back; further calls do nothing.
func (t *Tenants) AcquireWatch(tenant uuid.UUID) (release func(), ok bool) {
	if t == nil || t.maxWatches <= 0 {
		return func() {}, true
	}
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	if t.watches[tenant] >= t.maxWatches {
		return nil, false
	}
	t.watches[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			t.watchMu.Lock()
			defer t.watchMu.Unlock()
			if t.watches[tenant]--; t.watches[tenant] <= 0 {
				delete(t.watches, tenant)
			}
		})
	}, true
}

// Watches returns tenant's open watch streams.
func (t *Tenants) Watches(tenant uuid.UUID) int {
	if t == nil {
		return 0
	}
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	return t.watches[tenant]
}
