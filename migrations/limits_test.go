package migrations_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// liveOf is the count mcp_tenant_servers keeps for tenant, and the count
// of its servers that are not deregistered, read in tx as tenant (who sees
// all of its own rows); it leaves tenant set.
func liveOf(t *testing.T, tx pgx.Tx, tenant uuid.UUID) (kept, actual int) {
	t.Helper()
	setTenant(t, tx, tenant)
	kept = count(t, tx, `SELECT COALESCE((SELECT live FROM mcp_tenant_servers WHERE tenant_id = $1), 0)`, tenant)
	actual = count(t, tx, `SELECT count(*) FROM mcp_servers WHERE tenant_id = $1 AND status <> 'deregistered'`, tenant)
	return kept, actual
}

// The trigger keeps each tenant's live count through every write the
// lifecycle makes through the app role: insert, sweep-like status changes,
// deregistration, registration again.
func TestTenantLiveCountKept(t *testing.T) {
	t.Parallel()
	tx := pgtest.AppTx(t)
	a, b := uuid.New(), uuid.New()
	ids := []uuid.UUID{seedTx(t, tx, a, "one"), seedTx(t, tx, a, "two"), seedTx(t, tx, a, "three")}
	seedTx(t, tx, b, "one")
	check := func(what string, tenant uuid.UUID, want int) {
		t.Helper()
		kept, actual := liveOf(t, tx, tenant)
		if kept != want || actual != want {
			t.Fatalf("%s: kept %d, actual %d, want %d", what, kept, actual, want)
		}
	}
	check("after three inserts", a, 3)
	check("the other tenant", b, 1)
	set := func(id uuid.UUID, status string) {
		t.Helper()
		setTenant(t, tx, a)
		if _, err := tx.Exec(ctx, `UPDATE mcp_servers SET status = $2 WHERE server_id = $1`, id, status); err != nil {
			t.Fatalf("set %s: %v", status, err)
		}
	}
	set(ids[0], "degraded")
	set(ids[0], "unhealthy")
	check("degraded and unhealthy still count", a, 3)
	set(ids[0], "deregistered")
	set(ids[1], "deregistered")
	check("after two deregistrations", a, 1)
	set(ids[1], "deregistered") // no change, no count
	check("deregistered again", a, 1)
	set(ids[0], "healthy")
	check("registered again", a, 2)
	check("the other tenant untouched", b, 1)

	// The app role sees and locks only its own tenant's count.
	setTenant(t, tx, uuid.Nil)
	if n := count(t, tx, `SELECT count(*) FROM mcp_tenant_servers`); n != 0 {
		t.Fatalf("without a tenant the app sees %d counts", n)
	}
	setTenant(t, tx, a)
	if _, err := tx.Exec(ctx, `UPDATE mcp_tenant_servers SET live = 0 WHERE tenant_id = $1`, b); err != nil {
		t.Fatalf("update of another tenant's count: %v", err)
	}
	check("another tenant's count cannot be touched", b, 1)
}

// capability_bytes is the size of the advertisement's JSON text, kept by
// its trigger on insert and on every update of the advertisement.
func TestCapabilityBytesKept(t *testing.T) {
	t.Parallel()
	// Written and read back as the tenant, in one rolled-back transaction.
	tx := pgtest.AppTx(t)
	a := uuid.New()
	id := seedTx(t, tx, a, "one")
	want := count(t, tx, `SELECT octet_length(capability_advertisement::text) FROM mcp_servers WHERE server_id = $1`, id)
	if got := count(t, tx, `SELECT capability_bytes FROM mcp_servers WHERE server_id = $1`, id); got != want || got == 0 {
		t.Fatalf("capability_bytes %d, want %d", got, want)
	}
	// Already in jsonb's own text form: the size is the text's.
	for _, caps := range []string{`{"x": "0123456789", "tools": {"listChanged": true}}`, ""} {
		want := len(caps)
		var v any
		if caps != "" {
			v = caps
		}
		if err := inSavepoint(t, tx, `UPDATE mcp_servers SET capability_advertisement = $2::jsonb, capability_bytes = 7 WHERE server_id = $1`, id, v); err == nil {
			t.Fatal("the app set capability_bytes itself")
		}
		if _, err := tx.Exec(ctx, `UPDATE mcp_servers SET capability_advertisement = $2::jsonb WHERE server_id = $1`, id, v); err != nil {
			t.Fatal(err)
		}
		got := count(t, tx, `SELECT capability_bytes FROM mcp_servers WHERE server_id = $1`, id)
		text := count(t, tx, `SELECT COALESCE(octet_length(capability_advertisement::text), 0) FROM mcp_servers WHERE server_id = $1`, id)
		if got != text || got != want {
			t.Fatalf("advertisement %q: capability_bytes %d, text %d, want %d", caps, got, text, want)
		}
	}
}
