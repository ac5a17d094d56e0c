package feed_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// pausable is a memory store whose feed reads can be held back, and
// whose LatestPosition calls are counted.
type pausable struct {
	*memstore.Store
	paused  atomic.Bool
	latests atomic.Int64
}

func (p *pausable) ReadFeed(ctx context.Context, tenants []uuid.UUID, after []registry.Position, limit int) ([]store.FeedBatch, error) {
	if p.paused.Load() {
		// Nothing new. A tenant never read (a position of epoch 0) is left
		// out: its horizon would look like a new history to the hub, which
		// then forgets what is pending.
		var out []store.FeedBatch
		for i, t := range tenants {
			if after[i].Epoch != 0 {
				out = append(out, store.FeedBatch{Tenant: t, Horizon: after[i]})
			}
		}
		return out, nil
	}
	return p.Store.ReadFeed(ctx, tenants, after, limit)
}

func (p *pausable) LatestPosition(ctx context.Context, tenant uuid.UUID, upTo registry.Position) (registry.Position, error) {
	p.latests.Add(1)
	return p.Store.LatestPosition(ctx, tenant, upTo)
}

func startPausable(t *testing.T) (*pausable, *feed.Hub) {
	t.Helper()
	src := &pausable{Store: memstore.New(clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)))}
	hub := feed.NewHub(feed.Options{Source: src, PollInterval: time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testwait.Eventually(t, "the hub starts", func() bool {
		_, err := hub.TenantVersion(t.Context(), uuid.New(), src)
		return !errors.Is(err, feed.ErrNotStarted)
	})
	return src, hub
}

func register(t *testing.T, s *pausable, tenant uuid.UUID, module string) registry.Event {
	t.Helper()
	_, _, ev, err := s.Register(t.Context(), tenant, registry.ServerInfo{
		ModuleName: module, Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func version(t *testing.T, hub *feed.Hub, src *pausable, tenant uuid.UUID) feed.TenantVersion {
	t.Helper()
	v, err := hub.TenantVersion(t.Context(), tenant, src)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func same(a, b feed.TenantVersion) bool {
	if a.Latest != b.Latest || len(a.Pending) != len(b.Pending) {
		return false
	}
	for i := range a.Pending {
		if a.Pending[i] != b.Pending[i] {
			return false
		}
	}
	return true
}

// A tenant's version: read from the store once, then from the feed; a
// write of this process counts at once (read-your-writes), and once the
// hub has read it the version is the one every replica computes.
func TestTenantVersion(t *testing.T) {
	t.Parallel()
	src, hub := startPausable(t)
	tenant := uuid.New()

	// A tenant the hub does not follow: the store is asked once, and the
	// hub follows the tenant from its answer.
	src.paused.Store(true)
	register(t, src, tenant, "calendar") // not read by the hub
	before := src.latests.Load()
	v0 := version(t, hub, src, tenant)
	if v0.Latest.Seq != 1 || len(v0.Pending) != 0 {
		t.Fatalf("a tenant of one event, asked first: %+v", v0)
	}
	if again := version(t, hub, src, tenant); !same(again, v0) || src.latests.Load() != before+1 {
		t.Fatalf("asked again: %+v, store asked %d times", again, src.latests.Load()-before)
	}

	// Another replica's write: unseen until the hub reads it.
	ev := register(t, src, tenant, "mail")
	if v := version(t, hub, src, tenant); !same(v, v0) {
		t.Fatalf("a write the hub has not read changed the version: %+v", v)
	}
	// This process's own write: at once.
	hub.Wrote(ev)
	v1 := version(t, hub, src, tenant)
	if same(v1, v0) || len(v1.Pending) != 1 || v1.Pending[0] != ev.EventID {
		t.Fatalf("after Wrote: %+v", v1)
	}

	src.paused.Store(false)
	var v2 feed.TenantVersion
	// The hub has read the writes when the version is past both events.
	testwait.Eventually(t, "the hub reads the writes", func() bool {
		v2 = version(t, hub, src, tenant)
		return len(v2.Pending) == 0 && v2.Latest.Seq == 2
	})
	if same(v2, v0) || same(v2, v1) {
		t.Fatalf("after the hub read: %+v", v2)
	}
	latest, err := src.Store.LatestPosition(t.Context(), tenant, registry.Position{Epoch: v2.Latest.Epoch, Seq: 1 << 62})
	if err != nil || latest != v2.Latest {
		t.Fatalf("version %+v, the store's latest %+v (%v)", v2.Latest, latest, err)
	}
	if src.latests.Load() != before+1 {
		t.Fatalf("the store was asked %d times, want once", src.latests.Load()-before)
	}

	// Wrote after the hub read the event: nothing pending.
	hub.Wrote(ev)
	if v := version(t, hub, src, tenant); !same(v, v2) {
		t.Fatalf("Wrote of an event already read: %+v", v)
	}
	// Another tenant's write changes nothing here.
	register(t, src, uuid.New(), "calendar")
	if v := version(t, hub, src, tenant); !same(v, v2) {
		t.Fatalf("another tenant's write: %+v", v)
	}
}

// A write this process made before the hub started committed before the
// hub's first horizon, which the hub never reads: it is not pending once
// the hub runs (it was, until PendingTTL, one minute, and set this
// replica's tags apart from the others').
func TestWroteBeforeTheHubStarted(t *testing.T) {
	t.Parallel()
	src := &pausable{Store: memstore.New(clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC)))}
	hub := feed.NewHub(feed.Options{Source: src, PollInterval: time.Millisecond})
	tenant := uuid.New()
	hub.Wrote(register(t, src, tenant, "calendar"))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var v feed.TenantVersion
	testwait.Eventually(t, "the hub starts", func() bool {
		var err error
		v, err = hub.TenantVersion(t.Context(), tenant, src)
		return !errors.Is(err, feed.ErrNotStarted)
	})
	latest, err := src.Store.LatestPosition(t.Context(), tenant, registry.Position{Epoch: v.Latest.Epoch, Seq: 1 << 62})
	if err != nil || len(v.Pending) != 0 || v.Latest != latest {
		t.Fatalf("version %+v, want the store's latest %+v and nothing pending (%v)", v, latest, err)
	}
}
