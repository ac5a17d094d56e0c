package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/store"
)

var _ store.AlertOutbox = (*Store)(nil)

// AlertLease is how long a claim of a destination's cursor holds it: a
// replica that dies while delivering keeps that destination from the others
// this long; one still delivering after it may send what another replica
// sends too (at least once). A held delivery is a few requests of at most
// alert.RequestTimeout (10 s) each.
const AlertLease = 30 * time.Second

// claimTimeout bounds the round trip that takes a lease and reads the
// claimed events.
const claimTimeout = 10 * time.Second

// alertClaim is a lease on a destination's cursor row, taken and ended in
// short transactions of their own (migration 0010): no session state and no
// open transaction is held while the events are delivered, so it works
// through a pooler in transaction mode, and holds back no other
// destination's horizon.
type alertClaim struct {
	pool        *pgxpool.Pool
	destination string
	claimant    uuid.UUID
	events      []registry.Event
	ended       bool
}

func (c *alertClaim) Events() []registry.Event { return c.events }

func (c *alertClaim) Ack(ctx context.Context, n int) error {
	if c.ended {
		return fmt.Errorf("alert claim of %s already ended", c.destination)
	}
	n = min(n, len(c.events))
	if n == 0 {
		c.Release(ctx)
		return nil
	}
	c.ended = true
	// The destination's position of each tenant moves to the last of its
	// events delivered; a tenant's events come in position order.
	last := make(map[uuid.UUID]int64)
	for _, ev := range c.events[:n] {
		last[ev.TenantID] = max(last[ev.TenantID], ev.Position.Seq)
	}
	tenants := make([]uuid.UUID, 0, len(last))
	positions := make([]int64, 0, len(last))
	for t, p := range last {
		tenants = append(tenants, t)
		positions = append(positions, p)
	}
	// The positions first, in a transaction of their own, then the
	// claim released. On Citus the positions of tenants on several
	// workers commit in two phases, after the coordinator, which holds the
	// claim: released in the same transaction, the claim could be taken by
	// another replica and a worker's position read by it before that
	// worker's commit, and that replica delivered the events again.
	// mcp_alert_ack releases the claim of the claimant it is given, and a
	// claimant that holds none (uuid.Nil) releases nothing.
	_, err := c.pool.Exec(ctx, `SELECT mcp_alert_ack($1, $2, $3, $4)`, c.destination, uuid.Nil, tenants, positions)
	// The claim is released either way: when the positions did not move,
	// what was sent is sent again (at least once), by whichever replica
	// claims next instead of after AlertLease. A release that fails leaves
	// the lease to run out.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	_, _ = c.pool.Exec(rctx, `SELECT mcp_alert_ack($1, $2, NULL::uuid[], NULL::bigint[])`, c.destination, c.claimant)
	return translate(err)
}

func (c *alertClaim) Release(ctx context.Context) {
	if c.ended {
		return
	}
	c.ended = true
	// A release that fails leaves the lease to run out.
	_, _ = c.pool.Exec(context.WithoutCancel(ctx), `SELECT mcp_alert_ack($1, $2, NULL::uuid[], NULL::bigint[])`, c.destination, c.claimant)
}

// ClaimAlerts takes destination's lease and returns the alert events after
// its cursor; nil when another replica holds the lease. The lease and the
// read are one implicit transaction, in one round trip. On Citus, while a
// worker is down or known to hang, the claim is of the tenants of the
// workers that answer (claimAlertsPerWorker).
func (s *Store) ClaimAlerts(ctx context.Context, destination string, limit int) (store.AlertClaim, error) {
	if s.workerHangs(ctx) {
		return s.claimAlertsPerWorker(ctx, destination, limit)
	}
	claim := &alertClaim{pool: s.pool, destination: destination, claimant: uuid.New()}
	var pb pgx.Batch
	pb.Queue(`SELECT mcp_alert_lease($1, $2, $3)`, destination, claim.claimant, AlertLease)
	pb.Queue(`
SELECT event_position, seq, event_id, tenant_id, kind, server_id, module_name, from_status, to_status,
       trace_id, occurred_at, body
FROM mcp_alert_claim($1, $2, $3)`, destination, claim.claimant, limit)
	// Not cut by the caller's context: a claim cut in flight may take the
	// lease on the server after the client gave up on it, and a release
	// sent then may run first and find nothing to release, leaving the
	// destination to no one for AlertLease. A stopping caller gets the
	// claim and releases it.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	br := s.pool.SendBatch(bctx, &pb)
	leased, err := readClaim(br, claim)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The lease may have been taken before the read failed (a canceled
		// context): give it up, or it would keep the destination from the
		// next mcpd for AlertLease. Releasing a lease not held is a no-op.
		claim.Release(ctx)
		if s.perWorkerAlerts(ctx, err) {
			return s.claimAlertsPerWorker(ctx, destination, limit)
		}
		return nil, translate(err)
	}
	if !leased {
		return nil, nil // another replica holds the lease
	}
	s.sawTenantsOf(len(claim.events), func(i int) uuid.UUID { return claim.events[i].TenantID })
	return claim, nil
}

// readClaim reads the answers of ClaimAlerts's batch into claim, and
// whether the lease was taken.
func readClaim(br pgx.BatchResults, claim *alertClaim) (leased bool, err error) {
	if err := br.QueryRow().Scan(&leased); err != nil {
		return false, err
	}
	rows, err := br.Query()
	if err != nil {
		return leased, err
	}
	claim.events, err = scanClaimRows(rows)
	return leased, err
}

// scanClaimRows reads the rows of mcp_alert_claim or mcp_alert_claim_of
// as events, and closes them.
func scanClaimRows(rows pgx.Rows) ([]registry.Event, error) {
	defer rows.Close()
	var events []registry.Event
	for rows.Next() {
		var (
			position int64
			r        eventRow
		)
		if err := rows.Scan(r.appendDest(append(make([]any, 0, 12), &position))...); err != nil {
			return nil, err
		}
		ev, _, err := r.event()
		if err != nil {
			return nil, err
		}
		ev.Position = registry.Position{Seq: position}
		events = append(events, ev)
	}
	return events, rows.Err()
}

// PendingAlerts counts destination's unacknowledged alert events.
func (s *Store) PendingAlerts(ctx context.Context, destination string) (int64, time.Time, error) {
	var (
		n      int64
		oldest *time.Time
	)
	if err := s.pool.QueryRow(ctx, `SELECT pending, oldest FROM mcp_alert_pending($1)`, destination).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, translate(err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, oldest.UTC(), nil
}

// UnhealthyServers lists every tenant's unhealthy servers. On Citus,
// while a worker is down or known to hang, those of the workers that
// answer, with a *store.PartialReadError (readAlertRows).
func (s *Store) UnhealthyServers(ctx context.Context) ([]store.UnhealthyServer, error) {
	const columns = `SELECT server_id, tenant_id, module_name, version, last_heartbeat_at, trace_id, unhealthy_since`
	return readAlertRows(ctx, s, columns+` FROM mcp_unhealthy_servers()`, columns+` FROM mcp_unhealthy_servers_of($1)`,
		nil, scanUnhealthyServer, func(u store.UnhealthyServer) uuid.UUID { return u.TenantID })
}

// scanUnhealthyServer reads a row of mcp_unhealthy_servers or
// mcp_unhealthy_servers_of.
func scanUnhealthyServer(row pgx.CollectableRow) (store.UnhealthyServer, error) {
	var (
		u     store.UnhealthyServer
		trace *string
		since *time.Time
	)
	err := row.Scan(&u.ServerID, &u.TenantID, &u.ModuleName, &u.Version, &u.LastHeartbeatAt, &trace, &since)
	u.LastHeartbeatAt = u.LastHeartbeatAt.UTC()
	if trace != nil {
		u.TraceID = strings.TrimSpace(*trace)
	}
	if since != nil {
		u.UnhealthySince = since.UTC()
	}
	return u, err
}
