package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// On Citus a flush of held heartbeats is written by one call per worker,
// for every tenant of that worker together (mcp_heartbeat_held_group): the
// call writes each server for the tenant that sent its heartbeat only, and
// the rest goes on to each tenant's own call (a recovery, a server not the
// tenant's, a row another transaction holds).
func TestCitusHeldGroups(t *testing.T) {
	f := newWorkerTenants(t)
	db, st, a, b, other := f.db, f.st, f.a, f.b, f.other
	ctx := t.Context()
	reg := func(tenant uuid.UUID, module string) registry.Server { return register(t, st, tenant, module) }
	a1, b1, b2, o1 := reg(a, "a1"), reg(b, "b1"), reg(b, "b2"), reg(other, "o1")
	agoHour := func(tenant, server uuid.UUID) {
		t.Helper()
		if _, err := db.Admin.Exec(ctx, `UPDATE mcp_servers SET last_heartbeat_at = now() - interval '1 hour'
			WHERE tenant_id = $1 AND server_id = $2`, tenant, server); err != nil {
			t.Fatal(err)
		}
	}
	lastBeat := f.lastBeat

	// The function itself, as cyberos_app: tenant a names b's server b1,
	// b names its own b2, received a second before the call's time (later
	// than its registration: a write never moves a heartbeat back).
	at := time.Now().UTC().Add(time.Minute).Truncate(time.Microsecond)
	b1Beat := lastBeat(b, b1.ServerID)
	var b2Beat time.Time
	rows, err := db.App.Query(ctx, `SELECT o_tenant_id, o_server_id FROM mcp_heartbeat_held_group($1, $2, $3, $4, $5)`,
		a, []uuid.UUID{a, b}, []uuid.UUID{b1.ServerID, b2.ServerID}, []int64{0, time.Second.Microseconds()}, at)
	if err != nil {
		t.Fatal(err)
	}
	var written [][2]uuid.UUID
	for rows.Next() {
		var w [2]uuid.UUID
		if err := rows.Scan(&w[0], &w[1]); err != nil {
			t.Fatal(err)
		}
		written = append(written, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(written) != 1 || written[0] != [2]uuid.UUID{b, b2.ServerID} {
		t.Errorf("a's held heartbeat of b's b1 beside b's of b2: wrote %v, want b2 of b alone", written)
	}
	if !lastBeat(b, b1.ServerID).Equal(b1Beat) {
		t.Error("tenant a's held heartbeat of b's server b1 moved its last heartbeat")
	}
	if got, want := lastBeat(b, b2.ServerID), at.Add(-time.Second); !got.Equal(want) {
		t.Errorf("b2's last heartbeat %v, want %v (its age before the call's time)", got, want)
	}
	// A heartbeat received before the one written never moves it back.
	if _, err := db.App.Exec(ctx, `SELECT * FROM mcp_heartbeat_held_group($1, $2, $3, $4, $5)`,
		b, []uuid.UUID{b}, []uuid.UUID{b2.ServerID}, []int64{time.Minute.Microseconds()}, at); err != nil {
		t.Fatal(err)
	}
	if got, want := lastBeat(b, b2.ServerID), at.Add(-time.Second); !got.Equal(want) {
		t.Errorf("an older held heartbeat moved b2's last heartbeat from %v to %v", want, got)
	}

	// Through a store whose connections record their calls: a flush of
	// the three tenants, no row held, makes one call per worker, then one
	// of its own for each tenant that has a heartbeat left: a (b1 is not
	// its server) and other (o1 is degraded), not b (b2 is healthy).
	counted, calls := tracedStore(t, db, pgstore.Options{})
	if _, err := db.Admin.Exec(ctx, `UPDATE mcp_servers SET status = 'degraded' WHERE tenant_id = $1 AND server_id = $2`,
		other, o1.ServerID); err != nil {
		t.Fatal(err)
	}
	agoHour(b, b2.ServerID)
	b2Beat = lastBeat(b, b2.ServerID)
	res := counted.WriteHeldBatch(ctx, []store.TenantHeld{
		{Tenant: a, Beats: []store.HeldHeartbeat{{ServerID: b1.ServerID}}},
		{Tenant: other, Beats: []store.HeldHeartbeat{{ServerID: o1.ServerID}}},
		{Tenant: b, Beats: []store.HeldHeartbeat{{ServerID: b2.ServerID}}},
	})
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("share %d: %v", i, r.Err)
		}
	}
	if len(res[2].Outcomes) != 0 || !lastBeat(b, b2.ServerID).After(b2Beat) {
		t.Errorf("b2, healthy: outcomes %+v, or its heartbeat not written", res[2].Outcomes)
	}
	if groups, own := calls.count("mcp_heartbeat_held_group("), calls.tenants("mcp_heartbeat_held("); groups != 2 ||
		len(own) != 2 || !slices.Contains(own, a) || !slices.Contains(own, other) {
		t.Errorf("a flush of tenants on two workers: %d calls of mcp_heartbeat_held_group, mcp_heartbeat_held for %v; "+
			"want 2, and one each for a %v and other %v", groups, own, a, other)
	}

	// Through the store: a flush of the three tenants. a's heartbeat of
	// b's server is not found, o1 (degraded meanwhile) recovers with its
	// event, and b2, whose row another transaction holds, is busy: the
	// worker's call waits for it no longer than its lock timeout, then
	// each of its tenants goes on its own.
	if _, err := db.Admin.Exec(ctx, `UPDATE mcp_servers SET status = 'degraded' WHERE tenant_id = $1 AND server_id = $2`,
		other, o1.ServerID); err != nil {
		t.Fatal(err)
	}
	holder, err := db.Admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `SELECT 1 FROM mcp_servers WHERE tenant_id = $1 AND server_id = $2 FOR UPDATE`,
		b, b2.ServerID); err != nil {
		t.Fatal(err)
	}
	agoHour(a, a1.ServerID)
	a1Beat := lastBeat(a, a1.ServerID)
	flush := []store.TenantHeld{
		{Tenant: a, Beats: []store.HeldHeartbeat{{ServerID: a1.ServerID}, {ServerID: b1.ServerID}}},
		{Tenant: other, Beats: []store.HeldHeartbeat{{ServerID: o1.ServerID}}},
		{Tenant: b, Beats: []store.HeldHeartbeat{{ServerID: b2.ServerID}}},
	}
	res = st.WriteHeldBatch(ctx, flush)
	if len(res) != 3 {
		t.Fatalf("results of a flush of 3 tenants: %d", len(res))
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("tenant %d's share: %v", i, r.Err)
		}
	}
	outcome := func(share int, server uuid.UUID) *store.HeldOutcome {
		for _, o := range res[share].Outcomes {
			if o.ServerID == server {
				return &o
			}
		}
		return nil
	}
	if o := outcome(0, a1.ServerID); o != nil {
		t.Errorf("a1, healthy: outcome %+v, want none (written)", *o)
	}
	if !lastBeat(a, a1.ServerID).After(a1Beat) {
		t.Error("a1's held heartbeat was not written")
	}
	if o := outcome(0, b1.ServerID); o == nil || !errors.Is(o.Err, registry.ErrNotFound) {
		t.Errorf("a's heartbeat of b's b1: outcome %+v, want not found", o)
	}
	if !lastBeat(b, b1.ServerID).Equal(b1Beat) {
		t.Error("tenant a's held heartbeat of b's server b1 moved its last heartbeat")
	}
	if o := outcome(1, o1.ServerID); o == nil || o.Err != nil || o.Event == nil || o.Server.Status != registry.StatusHealthy {
		t.Errorf("o1, degraded: outcome %+v, want recovered with its event", o)
	}
	if o := outcome(2, b2.ServerID); o == nil || !errors.Is(o.Err, store.ErrBusy) {
		t.Errorf("b2, its row held: outcome %+v, want busy", o)
	}

	// Once the row is free, the next flush writes it.
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	agoHour(b, b2.ServerID)
	b2Beat = lastBeat(b, b2.ServerID)
	res = st.WriteHeldBatch(ctx, flush[2:])
	if len(res) != 1 || res[0].Err != nil || len(res[0].Outcomes) != 0 {
		t.Fatalf("b2's flush after the row was freed: %+v, want written", res)
	}
	if !lastBeat(b, b2.ServerID).After(b2Beat) {
		t.Error("b2's held heartbeat was not written once its row was free")
	}
}

// tracedStore returns a store on db's app role, with opts, whose
// connections record their statements in the queryLog returned. None of
// its tests is about a worker that hangs: without a WorkerStall of its
// own, the store takes patientStall.
func tracedStore(t *testing.T, db *pgtest.DB, opts pgstore.Options) (*pgstore.Store, *queryLog) {
	t.Helper()
	if opts.WorkerStall == 0 {
		opts.WorkerStall = patientStall
	}
	pool, calls := tracedPool(t, db.AppURL)
	st := pgstore.New(pool, opts)
	t.Cleanup(st.Close)
	return st, calls
}

// tracedPool returns a pool of url whose connections record their
// statements in the queryLog returned.
func tracedPool(t *testing.T, url string) (*pgxpool.Pool, *queryLog) {
	t.Helper()
	calls := &queryLog{}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = calls
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, calls
}

// queryLog records the statements of a pool's connections.
type queryLog struct {
	mu    sync.Mutex
	calls []pgx.TraceQueryStartData
}

func (c *queryLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, data)
	return ctx
}

func (c *queryLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchQuery records each statement of a pipeline as a call.
func (c *queryLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, pgx.TraceQueryStartData{SQL: data.SQL, Args: data.Args})
}

func (c *queryLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *queryLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// reset forgets the statements recorded so far.
func (c *queryLog) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = nil
}

// count returns how many calls named fn.
func (c *queryLog) count(fn string) int {
	return len(c.tenants(fn))
}

// tenants returns the first argument of each call that named fn.
func (c *queryLog) tenants(fn string) []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []uuid.UUID
	for _, d := range c.calls {
		if !strings.Contains(d.SQL, fn) || len(d.Args) == 0 {
			continue
		}
		switch v := d.Args[0].(type) {
		case [16]byte:
			out = append(out, v)
		case uuid.UUID:
			out = append(out, v)
		default:
			out = append(out, uuid.Nil)
		}
	}
	return out
}
