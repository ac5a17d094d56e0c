package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/registry"
)

// Helpers of the reliability tests (docs/reliability.md): fault injection,
// load, hostile input, clock skew. Each test logs its figure with t.Logf;
// run them with -v to read the figures.

// envLong turns on the long variants of the reliability tests: make
// reliability sets it.
const envLong = "MCPD_LONG"

// e2eInterval is the heartbeat interval startMcpd gives mcpd, and
// e2ePeriod its monitor period.
const (
	e2eInterval = 200 * time.Millisecond
	e2ePeriod   = 100 * time.Millisecond
)

func longRun() bool { return os.Getenv(envLong) == "1" }

// kill ends p with SIGKILL, as a crash or the OOM killer would, and waits
// for it to be gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill mcpd: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(pollCap):
		t.Fatal("mcpd still running after SIGKILL")
	}
}

// isUnavailable reports whether err is the contract's 503: problem type
// unavailable with a Retry-After.
func isUnavailable(err error) bool {
	var prob *api.Problem
	return errors.As(err, &prob) && prob.Status == http.StatusServiceUnavailable &&
		prob.Type == api.ProblemUnavailable && prob.RetryAfter > 0
}

// statusOf names the outcome of a call: "ok", an HTTP status, or
// "transport" for a call that got no answer.
func statusOf(err error) string {
	if err == nil {
		return "ok"
	}
	var prob *api.Problem
	if errors.As(err, &prob) {
		return fmt.Sprint(prob.Status)
	}
	return "transport"
}

// auditEvent is one row of mcp_audit_events, as the admin reads it.
type auditEvent struct {
	id uuid.UUID
	// pos is the event's position in its tenant's trail: commit order, on
	// PostgreSQL and on Citus (where seq comes from the sequence range of
	// the node that inserted the event). The tests that compare positions
	// with a baseline write one tenant.
	pos      int64
	server   uuid.UUID
	kind     registry.EventKind
	from     *string
	to       string
	occurred time.Time
}

// dbServer is one row of mcp_servers with its skills count.
type dbServer struct {
	id     uuid.UUID
	module string
	status string
	lastHB time.Time
	skills int
}

// dbState is every server and event of a test database, read by the
// superuser (no row-level security).
type dbState struct {
	servers map[uuid.UUID]dbServer
	events  map[uuid.UUID][]auditEvent // by server, in commit order (pos)
	orphans []auditEvent               // events of no server row
}

func readState(t *testing.T, admin *pgxpool.Pool) dbState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pollCap)
	defer cancel()
	st := dbState{servers: map[uuid.UUID]dbServer{}, events: map[uuid.UUID][]auditEvent{}}
	// One snapshot for both reads: a monitor may be sweeping meanwhile.
	tx, err := admin.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, `
SELECT s.server_id, s.module_name, s.status, s.last_heartbeat_at, count(k.skill_id)
FROM mcp_servers s LEFT JOIN mcp_skills k ON k.tenant_id = s.tenant_id AND k.server_id = s.server_id
GROUP BY s.tenant_id, s.server_id`)
	if err != nil {
		t.Fatalf("read servers: %v", err)
	}
	for rows.Next() {
		var s dbServer
		if err := rows.Scan(&s.id, &s.module, &s.status, &s.lastHB, &s.skills); err != nil {
			t.Fatalf("scan server: %v", err)
		}
		st.servers[s.id] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read servers: %v", err)
	}
	rows, err = tx.Query(ctx, `SELECT event_id, position, server_id, kind, from_status, to_status, occurred_at FROM mcp_audit_events
		ORDER BY tenant_id, position`)
	if err != nil {
		t.Fatalf("read events: %v", err)
	}
	for rows.Next() {
		var e auditEvent
		var kind string
		if err := rows.Scan(&e.id, &e.pos, &e.server, &kind, &e.from, &e.to, &e.occurred); err != nil {
			t.Fatalf("scan event: %v", err)
		}
		e.kind = registry.EventKind(kind)
		if _, ok := st.servers[e.server]; !ok {
			st.orphans = append(st.orphans, e)
			continue
		}
		st.events[e.server] = append(st.events[e.server], e)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read events: %v", err)
	}
	return st
}

// count returns how many events of kind server has.
func (st dbState) count(server uuid.UUID, kind registry.EventKind) int {
	n := 0
	for _, e := range st.events[server] {
		if e.kind == kind {
			n++
		}
	}
	return n
}

// assertConsistent fails t unless the database holds no partial write:
// every event belongs to a server row; every server's trail starts with its
// registration, each event starts from the status the one before it ended
// in and is a transition its kind allows (registry.Kinds: no unhealthy
// from unhealthy, no degraded from unhealthy), and the last one ends in the
// row's status (never a transition without its event, never two events for
// one transition); and, when skillsOf is
// not nil, every server has the skills count it gives for the module.
func assertConsistent(t *testing.T, st dbState, skillsOf func(module string) int) {
	t.Helper()
	if len(st.orphans) > 0 {
		t.Fatalf("%d audit events of no server row, first %+v", len(st.orphans), st.orphans[0])
	}
	ids := make([]uuid.UUID, 0, len(st.servers))
	for id := range st.servers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return st.servers[ids[i]].module < st.servers[ids[j]].module })
	for _, id := range ids {
		s := st.servers[id]
		evs := st.events[id]
		if len(evs) == 0 {
			t.Fatalf("server %s (%s) has no audit event", s.module, id)
		}
		if evs[0].kind != registry.KindRegistered || evs[0].from != nil {
			t.Fatalf("server %s: trail starts with %s from %v, not a registration", s.module, evs[0].kind, evs[0].from)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].from == nil || *evs[i].from != evs[i-1].to {
				t.Fatalf("server %s: event %d (%s) starts from %v, the one before ended in %s: %s",
					s.module, i, evs[i].kind, deref(evs[i].from), evs[i-1].to, trail(evs))
			}
		}
		for i, e := range evs {
			if !e.kind.Spec().Allows(registry.Status(deref0(e.from)), registry.Status(e.to)) {
				t.Fatalf("server %s: event %d (%s) from %s to %s is no transition of the contract: %s",
					s.module, i, e.kind, deref(e.from), e.to, trail(evs))
			}
		}
		if last := evs[len(evs)-1]; last.to != s.status {
			t.Fatalf("server %s is %s but its last event (%s) ends in %s: %s", s.module, s.status, last.kind, last.to, trail(evs))
		}
		if skillsOf != nil {
			if want := skillsOf(s.module); s.skills != want {
				t.Fatalf("server %s has %d skills, registered with %d", s.module, s.skills, want)
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// deref0 is *s, or "" (registry.NoStatus) for nil.
func deref0(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// trail is a server's events as "registered degraded unhealthy".
func trail(evs []auditEvent) string {
	kinds := make([]string, len(evs))
	for i, e := range evs {
		kinds[i] = strings.TrimPrefix(string(e.kind), "mcp.server.")
	}
	return strings.Join(kinds, " ")
}

// logLines returns the lines of a JSON log that contain every one of subs.
func logLines(log string, subs ...string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		ok := line != ""
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// assertNoPanic fails t when a log mentions a panic.
func assertNoPanic(t *testing.T, name, log string) {
	t.Helper()
	if lines := logLines(strings.ToLower(log), "panic"); len(lines) > 0 {
		t.Fatalf("%s logged a panic:\n%s", name, strings.Join(lines, "\n"))
	}
}

// assertNoErrorLogs fails t when a JSON log has an error line other than a
// sweep that ran out of its time (the interval, 200ms here): on a loaded
// machine that happens, is logged at error level, and the next sweep
// carries on (the blind-window rule covers the gap). The time runs out
// in a statement (pgx's "timeout") or, on Citus, between the tenants'
// calls (the context's own error).
func assertNoErrorLogs(t *testing.T, name, log string) {
	t.Helper()
	for _, line := range logLines(log, `"level":"ERROR"`) {
		timedOut := strings.Contains(line, "store unavailable: timeout") ||
			strings.Contains(line, "store unavailable: context deadline exceeded")
		if !strings.Contains(line, `"msg":"sweep failed"`) || !timedOut {
			t.Fatalf("%s logged an error:\n%s", name, line)
		}
	}
}

// token returns a read-write token of tenant for p.
func (p *proc) token(t *testing.T, tenant uuid.UUID) string {
	t.Helper()
	tok, err := auth.Issue(p.secret, tenant, "e2e", "mcp:read mcp:write", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
