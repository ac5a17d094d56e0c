package alert

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/lifecycle"
	"github.com/cyberos/mcpd/pkg/registry"
)

// AlertName is the alertname label of the alert an unhealthy server raises.
const AlertName = "MCPServerUnhealthy"

// AlertNameMassLoss is the alertname label of a tenant's mass heartbeat
// loss: more than the set share of its live servers went unhealthy in one
// sweep.
const AlertNameMassLoss = "MCPRegistryMassHeartbeatLoss"

// AlertNameSkill is the alertname label of a skill outage: no skill of a
// name is available in a tenant any more.
const AlertNameSkill = "MCPSkillUnavailable"

// Severity is the severity label of every alert.
const Severity = "critical"

// Alert is one firing or resolved MCPServerUnhealthy alert about a server.
type Alert struct {
	// Event is the audit event that fired or resolved the alert; nil for a
	// periodic re-send of a firing alert, a mass loss or a skill outage.
	Event *registry.Event
	// Firing is true for a server that is unhealthy (a skill that is
	// unavailable), false once resolved.
	Firing     bool
	TenantID   uuid.UUID
	ServerID   uuid.UUID
	ModuleName string
	Version    string
	TraceID    string
	// LastHeartbeatAt is the server's last heartbeat; zero when not known.
	LastHeartbeatAt time.Time
	// StartsAt is when the server became unhealthy; zero when not known (a
	// resolved alert).
	StartsAt time.Time
	// EndsAt is, for a firing alert, how long a destination may hold it
	// without a re-send; for a resolved one, when the server recovered or
	// was deregistered.
	EndsAt time.Time
	// MassLoss, when set, makes this an MCPRegistryMassHeartbeatLoss alert
	// about the tenant rather than about one server (no event, no server).
	MassLoss *lifecycle.MassLoss
	// Skill, when set, makes this an MCPSkillUnavailable alert about a
	// skill name of the tenant rather than about one server (no event, no
	// server).
	Skill *SkillOutage
}

// SkillOutage is what an MCPSkillUnavailable alert says beyond its tenant,
// its state and its times.
type SkillOutage struct {
	// Skill is the skill's name.
	Skill string
	// ID identifies this raise or this resolution of the outage, the same
	// on every re-delivery: the webhook's X-MCPD-Event-ID.
	ID uuid.UUID
	// Resend marks a periodic re-send of a firing alert, which only a
	// Resending destination gets.
	Resend bool
}

// Destination is somewhere alerts are delivered. Its name identifies its
// cursor in the store, its metrics and its log lines, so it must be stable
// across restarts and unique among the destinations of one deployment.
type Destination interface {
	Name() string
	// Send delivers alerts in order. It returns how many of them, from the
	// front, the destination accepted; with a nil error, all of them. A
	// failed request is a *DeliveryError.
	Send(ctx context.Context, alerts []Alert) (int, error)
}

// Resending is a Destination that forgets a firing alert unless it is sent
// again before its EndsAt, as Alertmanager does. The dispatcher re-sends
// every firing alert to it each resend interval, and sends it a firing
// alert only while the store still says the server is unhealthy since that
// event.
type Resending interface {
	Destination
	ResendsFiring() bool
}

// DeliveryError is a request that a destination did not accept.
type DeliveryError struct {
	// Status is the HTTP status code; 0 when no response came.
	Status int
	// Alerts is how many alerts the failed request carried.
	Alerts int
	// Err is the transport error, or what the response said.
	Err error
}

func (e *DeliveryError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("send %d alerts: %v", e.Alerts, e.Err)
	}
	return fmt.Sprintf("send %d alerts: status %d: %v", e.Alerts, e.Status, e.Err)
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// retriedStatuses are the 4xx answers about the request's destination
// rather than its alerts: wrong URL, credentials, a proxy, throttling. They
// are retried like a 5xx, since skipping would drop every alert while the
// destination is misconfigured.
var retriedStatuses = []int{
	http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed,
	http.StatusProxyAuthRequired, http.StatusRequestTimeout, http.StatusMisdirectedRequest,
	http.StatusTooEarly, http.StatusTooManyRequests,
}

// Permanent reports whether the destination refused the alerts themselves
// (a 4xx such as 400, 413 or 422): the same request would fail again, so
// the dispatcher logs it and skips those alerts rather than block the
// queue behind them.
func (e *DeliveryError) Permanent() bool {
	return e.Status >= 400 && e.Status < 500 && !slices.Contains(retriedStatuses, e.Status)
}

// summary is the one-line description of an alert.
func summary(a Alert) string {
	if a.Skill != nil {
		return fmt.Sprintf("skill %q of tenant %s is unavailable on every MCP server", a.Skill.Skill, a.TenantID)
	}
	return fmt.Sprintf("MCP server %s of tenant %s is unhealthy", a.ModuleName, a.TenantID)
}
