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
