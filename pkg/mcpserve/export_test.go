package mcpserve

import "github.com/google/uuid"

// Subscribed returns how many subscriptions tenant accepted.
func (h *Handler) Subscribed(tenant uuid.UUID) int64 {
	n, _ := h.counts(tenant)
	return n
}

// Followed returns how many of tenant's events were followed.
func (h *Handler) Followed(tenant uuid.UUID) int64 {
	_, n := h.counts(tenant)
	return n
}

// Tenants returns how many tenants have an MCP server now.
func (h *Handler) Tenants() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.tenants)
}

// Sessions returns how many sessions tenant has open.
func (h *Handler) Sessions(tenant uuid.UUID) int {
	h.mu.Lock()
	t := h.tenants[tenant]
	h.mu.Unlock()
	if t == nil {
		return 0
	}
	return t.sessions()
}

// Subscriptions returns how many subscriptions tenant's sessions hold.
func (h *Handler) Subscriptions(tenant uuid.UUID) int {
	h.mu.Lock()
	t := h.tenants[tenant]
	h.mu.Unlock()
	if t == nil {
		return 0
	}
	return t.subscriptions()
}
