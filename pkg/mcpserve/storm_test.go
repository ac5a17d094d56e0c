package mcpserve_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cyberos/mcpd/pkg/mcpserve"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// TestStorm: 100 subscribers (half on each revision) of a skill and of a
// server that flaps degraded/healthy eight times a second get at most one
// notification per resource per second each, and the last one after the
// last change.
func TestStorm(t *testing.T) {
	t.Parallel()
	const (
		subscribers = 100
		interval    = 100 * time.Millisecond
		step        = 250 * time.Millisecond // > 2 intervals: degraded at each sweep
		steps       = 24                     // six seconds of the fake clock
	)
	e := setup(t, envOptions{interval: interval})
	tenant := uuid.New()
	flappy := e.register(t, tenant, "flappy", "search")
	steady := e.register(t, tenant, "steady", "search")
	tok := e.token(t, tenant, "mcp:read")
	uris := []string{mcpserve.SkillURI("search"), mcpserve.ServerURI("flappy")}

	recs := make([]*recorder, subscribers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range subscribers {
		wg.Go(func() {
			rev := revisions[i%2]
			cs, rec := e.connect(t, tok, rev)
			for _, u := range uris {
				if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: u}); err != nil {
					t.Errorf("subscribe: %v", err)
				}
			}
			mu.Lock()
			recs[i] = rec
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	testwait.Eventually(t, "every subscription", func() bool {
		return e.mcp.Subscribed(tenant) >= subscribers*int64(len(uris))
	})

	start := e.clock.Now()
	transitions := 0
	followed := e.mcp.Followed(tenant)
	for i := range steps {
		e.clock.Advance(step)
		e.heartbeat(t, tenant, steady.ServerID)
		evs, err := e.monitor.Sweep(t.Context(), e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || evs[0].Kind != registry.KindDegraded {
			t.Fatalf("step %d: sweep: %+v", i, evs)
		}
		e.heartbeat(t, tenant, flappy.ServerID) // recovered
		transitions += 2
		// The notifications of this step go out at this step's time.
		testwait.Eventually(t, "the step's events followed", func() bool {
			return e.mcp.Followed(tenant) >= followed+int64(transitions)
		})
	}
	// The last change's notification goes out once its second passed.
	e.clock.Advance(time.Second)
	elapsed := e.clock.Now().Sub(start)
	bound := int(elapsed/time.Second) + 1

	// Every subscriber hears of the storm's start and of its end.
	testwait.Eventually(t, "the notifications after the storm", func() bool {
		for _, rec := range recs {
			for _, u := range uris {
				if rec.updates(u) < 2 {
					return false
				}
			}
		}
		return true
	})
	total, most := 0, 0
	for i, rec := range recs {
		for _, u := range uris {
			n := rec.updates(u)
			total += n
			most = max(most, n)
			if n > bound {
				t.Errorf("subscriber %d (%s): %d notifications of %s in %v of %d transitions, want at most %d",
					i, revisions[i%2], n, u, elapsed, transitions, bound)
			}
		}
	}
	t.Logf("%d transitions in %v (fake clock): %d notifications to %d subscribers of %d resources, at most %d per resource (bound %d)",
		transitions, elapsed, total, subscribers, len(uris), most, bound)
}
