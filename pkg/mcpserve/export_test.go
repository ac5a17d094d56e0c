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
