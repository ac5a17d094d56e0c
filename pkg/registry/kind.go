package registry

// EventKind is the kind of an audit event: one of Kinds.
type EventKind string

// The audit event kinds; each has its entry in Kinds.
const (
	KindRegistered   EventKind = "mcp.server.registered"
	KindDegraded     EventKind = "mcp.server.degraded"
	KindUnhealthy    EventKind = "mcp.server.unhealthy"
	KindRecovered    EventKind = "mcp.server.recovered"
	KindDeregistered EventKind = "mcp.server.deregistered"
)

// KindSpec says what an audit event kind means: the transition it records
// and what the alert outbox, the skill alerts and a watching board make of
// it. Kinds is the one list of them; the stores, the API, the CLI, the TUI
// and the alert dispatcher all read it.
type KindSpec struct {
	Kind EventKind
	// From lists the statuses a server can leave by this event; NoStatus
	// stands for a server that did not exist before.
	From []Status
	// To is the status the server has after the event.
	To Status
	// Alert is the event's part in the alert outbox.
	Alert AlertRole
	// TakesSkills reports whether the event makes the skills it names
	// unavailable: a skill alert's outage begins with it.
	TakesSkills bool
	// Heartbeat reports whether the event is a heartbeat too: the
	// server's last heartbeat is the event's time.
	Heartbeat bool
	// Help says in a few words what happened, for completions and help.
	Help string
}

// NoStatus is the "from" status of an event about a server that did not
// exist before it (a first registration): its from_status is null.
const NoStatus Status = ""

// AlertRole is what the alert outbox does with an event of a kind.
type AlertRole int

// The alert roles.
const (
	// AlertNone: not in the outbox.
	AlertNone AlertRole = iota
	// AlertFires: in the outbox, and fires an alert for the server.
	AlertFires
	// AlertResolves: in the outbox, and resolves the server's alert when
	// it leaves unhealthy.
	AlertResolves
	// AlertResolvesFromUnhealthy: in the outbox only when it leaves
	// unhealthy, and then resolves the server's alert.
	AlertResolvesFromUnhealthy
)

// Kinds is every audit event kind, in the order people read them. Adding a
// kind is one entry here and one migration that adds it to the CHECK of
// mcp_audit_events.kind (and, if it takes part in alerts, to the alert
// outbox's predicate); the tests in migrations and pkg/testing/storetest
// compare both with this table.
var Kinds = []KindSpec{
	{Kind: KindRegistered, From: []Status{NoStatus, StatusHealthy, StatusDegraded, StatusUnhealthy, StatusDeregistered},
		To: StatusHealthy, Alert: AlertResolvesFromUnhealthy, Heartbeat: true,
		Help: "a server registered, or registered again"},
	{Kind: KindDegraded, From: []Status{StatusHealthy},
		To:   StatusDegraded,
		Help: "a server missed two heartbeats"},
	{Kind: KindUnhealthy, From: []Status{StatusHealthy, StatusDegraded},
		To: StatusUnhealthy, Alert: AlertFires, TakesSkills: true,
		Help: "a server missed three heartbeats; its skills are unavailable"},
	{Kind: KindRecovered, From: []Status{StatusDegraded, StatusUnhealthy},
		To: StatusHealthy, Alert: AlertResolves, Heartbeat: true,
		Help: "a degraded or unhealthy server heartbeats again"},
	{Kind: KindDeregistered, From: []Status{StatusHealthy, StatusDegraded, StatusUnhealthy},
		To: StatusDeregistered, Alert: AlertResolves, TakesSkills: true,
		Help: "a server deregistered; its skills are unavailable"},
}

// Spec returns k's entry of Kinds, or the zero KindSpec (no alert, no
// heartbeat, takes no skills) for a kind not in it.
func (k EventKind) Spec() KindSpec {
	for _, s := range Kinds {
		if s.Kind == k {
			return s
		}
	}
	return KindSpec{}
}

// Allows reports whether a server can go from status from (NoStatus: it
// did not exist) to status to by an event of this kind.
func (s KindSpec) Allows(from, to Status) bool {
	if s.Kind == "" || to != s.To {
		return false
	}
	for _, f := range s.From {
		if f == from {
			return true
		}
	}
	return false
}

// InOutbox reports whether an event of this kind from status from (nil:
// none) is in the alert outbox.
func (s KindSpec) InOutbox(from *Status) bool {
	switch s.Alert {
	case AlertFires, AlertResolves:
		return true
	case AlertResolvesFromUnhealthy:
		return from != nil && *from == StatusUnhealthy
	}
	return false
}

func eventKinds() []EventKind {
	out := make([]EventKind, len(Kinds))
	for i, s := range Kinds {
		out[i] = s.Kind
	}
	return out
}

// IsAlertEvent reports whether an audit event of kind, from status from
// (nil: none), is in the alert outbox, as Kinds says: unhealthy fires an
// alert; recovered, deregistered and registered again from unhealthy may
// resolve one.
func IsAlertEvent(kind EventKind, from *Status) bool { return kind.Spec().InOutbox(from) }
