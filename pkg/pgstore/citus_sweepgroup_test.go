package pgstore_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// A worker's tenants swept together (mcp_sweep_group, whose statements
// each name every tenant of the call) end as each swept alone
// (mcp_sweep_tenant): the same transitions, audit events and bodies, feed
// and alert positions, skills made unavailable, marks and blind windows.
// Two sets of three tenants of one worker go through the same history:
// healthy to degraded, degraded to unhealthy, healthy to unhealthy at
// once, skills taken away, and a tenant not swept for longer than
// BlindAfter, whose window holds its server back.
func TestCitusSweepGroupAsEachTenantAlone(t *testing.T) {
	c, db, clock, st, _ := citusSweepStore(t)
	ctx := t.Context()
	together := c.TenantsOnWorker(t, db, 0, 3)
	alone := c.TenantsOnWorker(t, db, 0, 3)
	sets := [][]uuid.UUID{together, alone}
	skills := func(names ...string) []registry.SkillInfo {
		var out []registry.SkillInfo
		for _, n := range names {
			out = append(out, registry.SkillInfo{Name: n})
		}
		return out
	}
	reg := func(tenant uuid.UUID, module string, names ...string) {
		t.Helper()
		if _, _, _, err := st.Register(ctx, tenant, registry.ServerInfo{ModuleName: module, Version: "1.0.0",
			SupportedProtocols: []string{"2025-06-18", "2025-03-26"}, Skills: skills(names...)}, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, set := range sets {
		reg(set[0], "a", "s2", "s1")
		reg(set[0], "b", "s3")
		reg(set[1], "c")
		reg(set[2], "d", "s4")
	}
	const blindAfter = "30 seconds"
	// sweep sweeps the first set together and the second each alone, at
	// the fake clock's time, and returns the events each call returned.
	sweep := func() [2][]registry.Event {
		t.Helper()
		var out [2][]registry.Event
		out[0] = sweepEvents(t, sweepGroupCall(t, db, together, clock.Now(), 100, blindAfter))
		for _, tenant := range alone {
			out[1] = append(out[1], sweepEvents(t, querySweepRows(t, db, `mcp_sweep_tenant($1, $2, '20 seconds',
				'30 seconds', 100, $3::interval)`, tenant, clock.Now(), blindAfter))...)
		}
		return out
	}

	t0 := clock.Now()
	clock.Advance(22 * time.Second)
	first := sweep() // a, b, c and d degraded
	for _, set := range sets {
		reg(set[0], "e", "s5")
		// The third tenant's last sweep long ago: its worker was down.
		if _, err := db.Admin.Exec(ctx, `UPDATE mcp_tenant_servers SET last_sweep_at = $2 WHERE tenant_id = $1`,
			set[2], t0.Add(-100*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(11 * time.Second)
	second := sweep() // a, b and c unhealthy; d held back by its tenant's blind window
	clock.Advance(23 * time.Second)
	third := sweep() // e unhealthy from healthy at once

	for i, got := range [][2][]registry.Event{first, second, third} {
		want := []int{4, 3, 1}[i]
		if len(got[0]) != want || len(got[1]) != want {
			t.Errorf("sweep %d: %d events together and %d alone, want %d", i+1, len(got[0]), len(got[1]), want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for i := range together {
		if a, b := tenantHistory(t, db, together[i]), tenantHistory(t, db, alone[i]); a != b {
			t.Errorf("tenant %d swept together:\n%s\nswept alone:\n%s", i, a, b)
		}
	}
	// What each call returned is what it wrote.
	for _, evs := range [][]registry.Event{first[0], second[0], third[0]} {
		for _, ev := range evs {
			var kind, module string
			if err := db.Admin.QueryRow(ctx, `SELECT kind, module_name FROM mcp_audit_events
				WHERE tenant_id = $1 AND event_id = $2`, ev.TenantID, ev.EventID).Scan(&kind, &module); err != nil {
				t.Fatalf("event %+v returned: %v", ev, err)
			}
			if string(ev.Kind) != kind || ev.ModuleName != module {
				t.Errorf("event returned %+v, written %s of %s", ev, kind, module)
			}
		}
	}
	if h := tenantHistory(t, db, together[0]); !strings.Contains(h, `"skills_affected":["s1","s2"]`) ||
		!strings.Contains(h, "e mcp.server.unhealthy healthy->unhealthy") {
		t.Errorf("the first tenant's history misses a transition:\n%s", h)
	}
	if h := tenantHistory(t, db, together[2]); strings.Contains(h, "unhealthy") {
		t.Errorf("a tenant in its blind window moved:\n%s", h)
	}
}

// A call of mcp_sweep_group moves at most its limit, a shard's tenants in
// the order of (tenant_id, server_id), and returns the tenants from the one
// whose servers the limit cut as left to sweep alone.
func TestCitusSweepGroupLimit(t *testing.T) {
	c, db, clock, st, _ := citusSweepStore(t)
	// Three tenants of one shard: a call takes a shard's tenants at a
	// time, in the order of their ids.
	tenants := sameShardTenants(t, c, db, 3)
	// Each tenant's servers in the order of their ids.
	ordered := make([][]string, len(tenants))
	for i, tenant := range tenants {
		a, b := register(t, st, tenant, "a"), register(t, st, tenant, "b")
		ordered[i] = []string{fmt.Sprintf("t%d/a", i), fmt.Sprintf("t%d/b", i)}
		if b.ServerID.String() < a.ServerID.String() {
			slices.Reverse(ordered[i])
		}
	}
	clock.Advance(25 * time.Second)
	got := sweepGroupCall(t, db, tenants, clock.Now(), 3, "30 seconds")
	var moved, left []string
	name := map[uuid.UUID]string{tenants[0]: "t0", tenants[1]: "t1", tenants[2]: "t2"}
	for _, r := range got {
		if r.left {
			left = append(left, name[r.tenant])
		} else {
			moved = append(moved, name[r.tenant]+"/"+r.ev.ModuleName)
		}
	}
	if want := fmt.Sprint(append(ordered[0], ordered[1][0])); fmt.Sprint(moved) != want || fmt.Sprint(left) != "[t1 t2]" {
		t.Errorf("limit 3 of 6 due: moved %v and left %v, want %s and [t1 t2]", moved, left, want)
	}
	if h := tenantHistory(t, db, tenants[2]); strings.Contains(h, "degraded") {
		t.Errorf("a tenant past the limit moved:\n%s", h)
	}
}

// sweepRow is a row of mcp_sweep_group or mcp_sweep_tenant: a
// transition, or (left) a tenant that the call left to sweep alone.
type sweepRow struct {
	tenant uuid.UUID
	left   bool
	ev     registry.Event // a transition's kind, module and statuses
}

// querySweepRows calls the sweep function call (its arguments args) as
// the store does, as the database's superuser, and returns its rows.
func querySweepRows(t *testing.T, db *pgtest.DB, call string, args ...any) []sweepRow {
	t.Helper()
	rows, err := db.Admin.Query(t.Context(), `
SELECT event_id, tenant_id, kind, server_id, module_name, from_status, to_status, trace_id, occurred_at, body
FROM `+call, args...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sweepRow, error) {
		var (
			id, tenant, server     *uuid.UUID
			kind, module, from, to *string
			trace                  *string
			occurred               *time.Time
			body                   []byte
		)
		if err := row.Scan(&id, &tenant, &kind, &server, &module, &from, &to, &trace, &occurred, &body); err != nil {
			return sweepRow{}, err
		}
		if id == nil {
			return sweepRow{tenant: *tenant, left: true}, nil
		}
		return sweepRow{tenant: *tenant, ev: registry.Event{EventID: *id, TenantID: *tenant,
			Kind: registry.EventKind(*kind), ModuleName: *module, ToStatus: registry.Status(*to)}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// sweepGroupCall calls mcp_sweep_group for tenants (all of one worker) at
// now, with lags of 2I and 3I for I = 10 s, the limit and blindAfter (an
// interval).
func sweepGroupCall(t *testing.T, db *pgtest.DB, tenants []uuid.UUID, now time.Time, limit int,
	blindAfter string) []sweepRow {
	t.Helper()
	return querySweepRows(t, db, `mcp_sweep_group($1, $2, $3, '20 seconds', '30 seconds', $4, $5::interval)`,
		tenants[0], tenants, now, limit, blindAfter)
}

// sweepEvents are the transitions of rows; a tenant left fails the test.
func sweepEvents(t *testing.T, rows []sweepRow) []registry.Event {
	t.Helper()
	var evs []registry.Event
	for _, r := range rows {
		if r.left {
			t.Fatalf("tenant %s left by the call", r.tenant)
		}
		evs = append(evs, r.ev)
	}
	return evs
}

// tenantHistory is what a tenant's sweeps wrote, without ids: its audit
// events in order (kind, statuses, position, body without the server id),
// its feed and alert positions, marks, servers and skills.
func tenantHistory(t *testing.T, db *pgtest.DB, tenant uuid.UUID) string {
	t.Helper()
	ctx := t.Context()
	var b strings.Builder
	// Within a time (a sweep, or registrations), the events in the order
	// of their modules: the servers' ids, whose order the positions
	// follow, differ between tenants. The positions are checked apart.
	rows, err := db.Admin.Query(ctx, `SELECT module_name, kind, coalesce(from_status, '-'), to_status, position,
		occurred_at, body, server_id FROM mcp_audit_events WHERE tenant_id = $1 ORDER BY position`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		at     time.Time
		text   string
		server string
	}
	var lines []line
	var next int64 = 1
	for rows.Next() {
		var (
			module, kind, from, to string
			pos                    int64
			at                     time.Time
			body                   map[string]any
			server                 uuid.UUID
		)
		if err := rows.Scan(&module, &kind, &from, &to, &pos, &at, &body, &server); err != nil {
			t.Fatal(err)
		}
		if pos != next {
			t.Errorf("tenant %s: position %d after %d", tenant, pos, next-1)
		}
		next = pos + 1
		if n := len(lines); n > 0 && lines[n-1].at.Equal(at) && kind != string(registry.KindRegistered) &&
			lines[n-1].server > server.String() {
			t.Errorf("tenant %s: the events of one sweep not in the order of their servers' ids", tenant)
		}
		delete(body, "server_id")
		j, _ := json.Marshal(body)
		lines = append(lines, line{at, fmt.Sprintf("%s %s %s->%s at %s %s\n", module, kind, from, to,
			at.UTC().Format(time.RFC3339Nano), j), server.String()})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Or(a.at.Compare(b.at), strings.Compare(a.text, b.text)) })
	for _, l := range lines {
		b.WriteString(l.text)
	}
	var (
		position, alert int64
		swept, blind    *time.Time
		live            int
	)
	if err := db.Admin.QueryRow(ctx, `SELECT f.position, f.alert_position, t.last_sweep_at, t.blind_until, t.live
		FROM mcp_tenant_feed f JOIN mcp_tenant_servers t USING (tenant_id) WHERE tenant_id = $1`, tenant).
		Scan(&position, &alert, &swept, &blind, &live); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "feed %d alert %d swept %v blind %v live %d\n", position, alert, swept, blind, live)
	rows, err = db.Admin.Query(ctx, `SELECT s.module_name, s.status, s.status_changed_at, k.name, k.available,
		coalesce(k.unavailable_reason, '-')
		FROM mcp_servers s LEFT JOIN mcp_skills k ON k.tenant_id = s.tenant_id AND k.server_id = s.server_id
		WHERE s.tenant_id = $1 ORDER BY s.module_name, k.name`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			module, status string
			changed        time.Time
			skill          *string
			available      *bool
			reason         *string
		)
		if err := rows.Scan(&module, &status, &changed, &skill, &available, &reason); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s since %s", module, status, changed.UTC().Format(time.RFC3339Nano))
		if skill != nil {
			fmt.Fprintf(&b, " skill %s available %v %s", *skill, *available, *reason)
		}
		b.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A call of mcp_sweep_group whose shard-at-a-time work meets a lock held
// past its lock_timeout (here a skill's row) undoes that work and sweeps
// its tenants one after another with its whole limit: the moves undone
// give their share back. The tenant whose row is held is left.
func TestCitusSweepGroupUndoneKeepsItsLimit(t *testing.T) {
	c, db, clock, st, _ := citusSweepStore(t)
	ctx := t.Context()
	tenants := sameShardTenants(t, c, db, 2)
	first, held := tenants[0], tenants[1]
	register(t, st, first, "a")
	register(t, st, first, "b")
	if _, _, _, err := st.Register(ctx, held, registry.ServerInfo{ModuleName: "c", Version: "1.0.0",
		SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "s"}}}, 0); err != nil {
		t.Fatal(err)
	}
	// The held tenant's server goes unhealthy (35 s > 3I), and its skill's
	// row is held by another transaction.
	holdRows(t, db, `SELECT 1 FROM mcp_skills WHERE tenant_id = $1 FOR UPDATE`, held)
	clock.Advance(35 * time.Second)
	var got []string
	for _, r := range sweepGroupCall(t, db, tenants, clock.Now(), 3, "1 hour") {
		name := map[uuid.UUID]string{first: "first", held: "held"}[r.tenant]
		if r.left {
			got = append(got, name+" left")
		} else {
			got = append(got, name+" "+r.ev.ModuleName+" "+string(r.ev.ToStatus))
		}
	}
	slices.Sort(got)
	if want := "[first a unhealthy first b unhealthy held left]"; fmt.Sprint(got) != want {
		t.Errorf("limit 3, a skill's row held: %v, want %s", got, want)
	}
}

// sameShardTenants returns n tenants of one shard of the first worker, in
// the order of their ids.
func sameShardTenants(t *testing.T, c *pgtest.Citus, db *pgtest.DB, n int) []uuid.UUID {
	t.Helper()
	shards := map[int64][]uuid.UUID{}
	for _, tenant := range c.TenantsOnWorker(t, db, 0, (n+1)*pgtest.CitusShardCount) {
		var shard int64
		if err := db.Admin.QueryRow(t.Context(), `SELECT get_shard_id_for_distribution_column('mcp_servers', $1::uuid)`,
			tenant).Scan(&shard); err != nil {
			t.Fatal(err)
		}
		if shards[shard] = append(shards[shard], tenant); len(shards[shard]) == n {
			tenants := shards[shard]
			slices.SortFunc(tenants, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
			return tenants
		}
	}
	t.Fatalf("no %d tenants of one shard", n)
	return nil
}
