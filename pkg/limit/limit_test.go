package limit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/cyberos/mcpd/pkg/limit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeNow is a clock that tests move by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

func newClock() *fakeNow { return &fakeNow{t: time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)} }

func TestRateAndBurstPerTenant(t *testing.T) {
	t.Parallel()
	clock := newClock()
	l := limit.New(limit.Options{Rate: 10, Burst: 20, Now: clock.now})
	a, b := uuid.New(), uuid.New()
	for i := range 20 {
		if ok, _ := l.Allow(a); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow(a)
	if ok {
		t.Fatal("request past the burst allowed")
	}
	if wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("retry after %s, want (0, 100ms] at 10/s", wait)
	}
	// Another tenant has a bucket of its own.
	if ok, _ := l.Allow(b); !ok {
		t.Fatal("the other tenant's first request refused")
	}
	clock.advance(100 * time.Millisecond)
	if ok, _ := l.Allow(a); !ok {
		t.Fatal("refused after a token came back")
	}
	if ok, _ := l.Allow(a); ok {
		t.Fatal("allowed two requests for one token")
	}
	// A second later: ten tokens.
	clock.advance(time.Second)
	n := 0
	for {
		ok, _ := l.Allow(a)
		if !ok {
			break
		}
		n++
	}
	if n != 10 {
		t.Fatalf("%d requests after 1 s at 10/s, want 10", n)
	}
}

func TestRetryAfterLongWait(t *testing.T) {
	t.Parallel()
	clock := newClock()
	l := limit.New(limit.Options{Rate: 0.25, Burst: 1, Now: clock.now})
	a := uuid.New()
	l.Allow(a)
	if ok, wait := l.Allow(a); ok || wait != 4*time.Second {
		t.Fatalf("Allow = %v, %s; want false, 4s at one request per 4 s", ok, wait)
	}
}

func TestNoRateNoLimit(t *testing.T) {
	t.Parallel()
	for _, l := range []*limit.Tenants{nil, limit.New(limit.Options{})} {
		for range 10_000 {
			if ok, _ := l.Allow(uuid.Nil); !ok {
				t.Fatal("refused without a rate")
			}
		}
		if l.Buckets() != 0 {
			t.Fatalf("%d buckets kept without a rate", l.Buckets())
		}
	}
}

// A flood of tenant ids keeps at most MaxBuckets buckets; idle ones (full
// again) are dropped.
func TestBucketsBounded(t *testing.T) {
	t.Parallel()
	clock := newClock()
	l := limit.New(limit.Options{Rate: 100, Burst: 100, MaxBuckets: 1600, Now: clock.now})
	for range 50_000 {
		l.Allow(uuid.New())
	}
	if n := l.Buckets(); n > 1600 {
		t.Fatalf("%d buckets after 50,000 tenants, want at most 1,600", n)
	}
	// Once every bucket is full again, the next sweep of each shard drops
	// them.
	clock.advance(2 * time.Second)
	for range 1000 {
		l.Allow(uuid.New())
	}
	if n := l.Buckets(); n > 1000 {
		t.Fatalf("%d buckets, want only the 1,000 recent ones", n)
	}
}

func TestWatches(t *testing.T) {
	t.Parallel()
	l := limit.New(limit.Options{MaxWatches: 2})
	a, b := uuid.New(), uuid.New()
	r1, ok1 := l.AcquireWatch(a)
	r2, ok2 := l.AcquireWatch(a)
	if !ok1 || !ok2 {
		t.Fatal("watches under the limit refused")
	}
	if _, ok := l.AcquireWatch(a); ok {
		t.Fatal("third watch allowed at a limit of 2")
	}
	if _, ok := l.AcquireWatch(b); !ok {
		t.Fatal("another tenant's watch refused")
	}
	r1()
	r1() // a second release gives nothing back
	if got := l.Watches(a); got != 1 {
		t.Fatalf("%d watches after one release, want 1", got)
	}
	r3, ok := l.AcquireWatch(a)
	if !ok {
		t.Fatal("watch refused after a release")
	}
	r2()
	r3()
	if got := l.Watches(a); got != 0 {
		t.Fatalf("%d watches after every release, want 0", got)
	}
	// No limit.
	var none *limit.Tenants
	release, ok := none.AcquireWatch(a)
	if !ok {
		t.Fatal("nil limits refused a watch")
	}
	release()
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	l := limit.New(limit.Options{Rate: 1000, Burst: 50, MaxWatches: 3})
	tenants := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 2000 {
				tenant := tenants[(i+j)%len(tenants)]
				l.Allow(tenant)
				if release, ok := l.AcquireWatch(tenant); ok {
					release()
				}
			}
		}()
	}
	wg.Wait()
	for _, tenant := range tenants {
		if n := l.Watches(tenant); n != 0 {
			t.Fatalf("%d watches left", n)
		}
	}
}
