package feed

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Observer is told what the hub reads, so that it can keep in memory what
// the feed says of servers (the Registrar's held heartbeats): every event
// of the tenants the hub follows, in commit order per tenant, and when
// the hub stops knowing a tenant's events. It is called with the hub's
// lock held: it must not block or call the hub.
type Observer interface {
	// Read is an event the hub read.
	Read(ev registry.Event)
	// Forget says that the hub stopped following tenant (uuid.Nil: every
	// tenant, as when the store's history changed): events of it may be
	// missed from now on.
	Forget(tenant uuid.UUID)
}

// Observe makes o the hub's observer; call it before Run.
func (h *Hub) Observe(o Observer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.observer = o
}

// keepTimeout bounds the read that starts following a tenant for Keep.
const keepTimeout = 10 * time.Second

// Keep makes the hub follow tenant, as a version asked does, and reports
// whether it followed the tenant before the call: then every event of the
// tenant that commits after the call reaches the observer. The first call
// for a tenant starts following it in the background and reports false.
// It never blocks on the store.
func (h *Hub) Keep(tenant uuid.UUID) bool {
	select {
	case <-h.started:
	default:
		return false
	}
	now := h.clock.Now()
	h.mu.RLock()
	tf := h.tenants[tenant]
	known := tf != nil
	ready := known && tf.err == nil && closed(tf.ready)
	fresh := ready && now.Sub(tf.usedAt) < IdleTimeout/2
	h.mu.RUnlock()
	switch {
	case fresh:
		return true
	case ready:
		h.mu.Lock()
		tf.usedAt = now
		h.mu.Unlock()
		return true
	case known:
		return false // being started
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
		defer cancel()
		_, _ = h.acquire(ctx, tenant, false, func(ctx context.Context) (registry.Position, error) {
			return h.Horizon(ctx, tenant)
		})
	}()
	return false
}

// Current reports whether the hub has read every event of tenant that
// committed before the call: it reads the tenant's present position
// (Horizon: one read shared by the calls waiting at the same time) and
// compares it with how far the hub has read the tenant. False when the
// hub does not follow the tenant.
func (h *Hub) Current(ctx context.Context, tenant uuid.UUID) (bool, error) {
	pos, err := h.Horizon(ctx, tenant)
	if err != nil {
		return false, err
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	tf := h.tenants[tenant]
	if tf == nil || tf.err != nil || !closed(tf.ready) {
		return false, nil
	}
	return tf.cursor.Epoch == pos.Epoch && tf.cursor.Seq >= pos.Seq, nil
}
