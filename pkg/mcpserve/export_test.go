package mcpserve

import "github.com/google/uuid"

// Subscribed returns how many subscriptions tenant accepted.
func (h *Handler) Subscribed(tenant uuid.UUID) int64 { return h.subscribed(tenant) }
