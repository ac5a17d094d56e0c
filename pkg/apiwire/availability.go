package apiwire

import "github.com/cyberos/mcpd/pkg/registry"

// AvailabilityList is the answer of GET /v1/mcp/availability: the
// available share of one window of each server asked for that the tenant
// has, in the order asked.
type AvailabilityList struct {
	Window  registry.AvailabilityWindow  `json:"window"`
	Servers []registry.AvailabilityRatio `json:"servers"`
}
