package feed_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/cyberos/mcpd/pkg/feed"
	"github.com/cyberos/mcpd/pkg/memstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/testwait"
)

// observed records what the hub tells its observer.
type observed struct {
	mu     sync.Mutex
	read   []registry.Event
	forgot []uuid.UUID
}

func (o *observed) Read(ev registry.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.read = append(o.read, ev)
}

func (o *observed) Forget(tenant uuid.UUID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forgot = append(o.forgot, tenant)
}

func (o *observed) reads() []registry.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]registry.Event(nil), o.read...)
}

func (o *observed) forgotten() []uuid.UUID {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]uuid.UUID(nil), o.forgot...)
}

// Keep follows a tenant from a read after the call: every event that
// commits once Keep reports true reaches the observer, and the tenant is
// forgotten when nothing kept it for the idle timeout.
func TestKeepTellsTheObserverEveryEventOfKeptTenants(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC))
	store := memstore.New(clock)
	hub := feed.NewHub(feed.Options{Source: store, Clock: clock})
	obs := &observed{}
	hub.Observe(obs)
	tenant, other := uuid.New(), uuid.New()
	if hub.Keep(tenant) {
		t.Fatal("Keep before the hub runs reported the tenant followed")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	register := func(tenant uuid.UUID, module string) {
		t.Helper()
		if _, _, _, err := store.Register(ctx, tenant, registry.ServerInfo{ModuleName: module, Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18"}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	register(tenant, "before") // before Keep: not the observer's
	testwait.Eventually(t, "the tenant followed", func() bool { return hub.Keep(tenant) })
	register(tenant, "calendar")
	register(other, "mail") // a tenant nobody keeps
	testwait.Eventually(t, "the event read", func() bool { return len(obs.reads()) == 1 })
	if ev := obs.reads()[0]; ev.TenantID != tenant || ev.ModuleName != "calendar" || ev.Kind != registry.KindRegistered {
		t.Fatalf("observer read %+v", ev)
	}

	// Idle past the timeout: forgotten, and Keep starts again.
	clock.Advance(feed.IdleTimeout + time.Second)
	testwait.Eventually(t, "the tenant forgotten", func() bool {
		clock.Advance(feed.DefaultPollInterval)
		f := obs.forgotten()
		return len(f) == 1 && f[0] == tenant
	})
	if hub.Keep(tenant) {
		t.Fatal("Keep of a forgotten tenant reported it followed")
	}
}

// Current is true only once the hub has read every event of the tenant
// committed before the call, and the observer has been told of each; the
// process's own writes (Wrote) reach the observer at once.
func TestCurrentMeansTheObserverHasEveryEvent(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 5, 17, 10, 0, 0, 0, time.UTC))
	store := memstore.New(clock)
	hub := feed.NewHub(feed.Options{Source: store, Clock: clock})
	obs := &observed{}
	hub.Observe(obs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		hub.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	tenant := uuid.New()
	if ok, err := hub.Current(ctx, tenant); err != nil || ok {
		t.Fatalf("Current of a tenant not followed: %v %v, want false", ok, err)
	}
	testwait.Eventually(t, "the tenant followed", func() bool { return hub.Keep(tenant) })
	for i := range 20 {
		_, _, ev, err := store.Register(ctx, tenant, registry.ServerInfo{ModuleName: fmt.Sprintf("m%02d", i),
			Version: "1.0.0", SupportedProtocols: []string{"2025-06-18"}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := hub.Current(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			testwait.Eventually(t, "current", func() bool {
				ok, err := hub.Current(ctx, tenant)
				return err == nil && ok
			})
		}
		reads := obs.reads()
		if len(reads) != i+1 || reads[i].EventID != ev.EventID {
			t.Fatalf("current after event %d: the observer has %d events", i, len(reads))
		}
	}
	other := registry.Event{EventID: uuid.New(), TenantID: tenant, ServerID: uuid.New(), Kind: registry.KindDegraded}
	hub.Wrote(other)
	if reads := obs.reads(); reads[len(reads)-1].EventID != other.EventID {
		t.Fatal("Wrote did not tell the observer")
	}
}
